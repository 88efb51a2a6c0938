"""The worker process: reads the queue, batches segments across jobs, renews leases, reports.

Its engines are in `workers.engines`; what it shares with the web tier is in `core`.
"""
