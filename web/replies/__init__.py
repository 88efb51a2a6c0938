"""What views answer with, shared by them: audio sent a piece at a time while the client reads
it, and requests that wait on a job while their client may leave."""
