// Package pgops holds the tests that prove PostgreSQL's own operations tools
// cover the object store: pg_dump / pg_restore, base backups with WAL
// archiving and point-in-time recovery, streaming and logical replicas, and
// vacuum after GC. They run real PostgreSQL servers (internal/pgtest) and
// real gateways (internal/testgw). `make pgops` runs the bigger versions.
package pgops
