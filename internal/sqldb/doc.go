// Package sqldb is the database seam shared by dbqueue's packages: one small
// executor interface with adapters for pgx and database/sql, the dialect
// names, placeholder rebinding, error classification and the retry policy
// for deadlocks and lock contention.
//
// It is internal so that the public packages can share a connection and its
// SQL conventions without widening their own APIs.
package sqldb
