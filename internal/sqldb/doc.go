// Package sqldb is the connection seam shared by dbqueue's packages: one
// small executor interface that the driver packages (driver/dbqpgx,
// driver/dbqmysql, driver/dbqsqlite) adapt their clients to, placeholder
// rebinding, error classification and the retry policy for deadlocks and
// lock contention. It imports no database driver: the drivers register
// what they know of their own errors and DSNs.
//
// It is internal so that the public packages can share a connection
// without widening their own APIs.
package sqldb
