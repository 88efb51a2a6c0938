"""The worker process: reads the queue, batches segments across jobs, renews leases, reports."""
