"""What the tests and the benchmarks both start: child processes kept in hand, Redis topologies on
loopback, an S3-compatible server. Imports no test and no benchmark."""
