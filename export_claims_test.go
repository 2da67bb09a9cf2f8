package dbqueue

import "github.com/dbqueue/dbqueue/internal/dialect"

// FollowsAbandoned reports whether job's reservation follows an abandoned
// attempt (dialect.AbandonedMark), as the worker reads it.
func FollowsAbandoned(job *Job) bool { return dialect.FollowsAbandoned(job.token) }
