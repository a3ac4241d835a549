// Package bench holds the throughput and latency benchmarks of s3gate (`make
// bench`): PUT and GET through a live in-process gateway with aws-sdk-go-v2
// clients, for each large engine, next to raw baselines measured in the same run
// on the same PostgreSQL server and data directory (large objects and bytea rows
// through pgx, fsynced files). It has benchmarks only; see README.md for how to
// run them and read the figures.
package bench
