package main

import (
	"flag"
	"fmt"

	"github.com/dbqueue/dbqueue"
)

// searchArgs are the flags of jobs search and failed search (besides
// -queue and -limit, which list shares).
type searchArgs struct {
	id, before *int64
	uuid, name *string
	text       *string
	scan       *int
}

// searchFlags defines the search flags on fs; before, when not nil, is
// the command's own -before flag (failed list pages with it too).
func searchFlags(fs *flag.FlagSet, before *int64) searchArgs {
	if before == nil {
		before = fs.Int64("before", 0, "search: read rows older than this id (the oldest id the previous search read)")
	}
	return searchArgs{
		id:     fs.Int64("id", 0, "search: the job with this id"),
		uuid:   fs.String("uuid", "", "search: jobs with this payload uuid"),
		name:   fs.String("name", "", "search: jobs of this handler name (displayName)"),
		text:   fs.String("text", "", "search: jobs whose payload holds this text, byte for byte"),
		scan:   fs.Int("scan", dbqueue.DefaultSearchScan, fmt.Sprintf("search: read at most this many of the newest rows (1 to %d)", dbqueue.MaxSearchScan)),
		before: before,
	}
}

// search checks the flags and makes the Search they ask for.
func (a searchArgs) search(cmd, queue string, limit int) (dbqueue.Search, error) {
	if *a.scan < 1 || *a.scan > dbqueue.MaxSearchScan {
		return dbqueue.Search{}, usagef("%s: -scan %d: use 1 to %d (search older rows with -before)", cmd, *a.scan, dbqueue.MaxSearchScan)
	}
	if limit < 1 || limit > dbqueue.MaxSearchLimit {
		return dbqueue.Search{}, usagef("%s: -limit %d: use 1 to %d", cmd, limit, dbqueue.MaxSearchLimit)
	}
	if *a.id < 0 || *a.before < 0 {
		return dbqueue.Search{}, usagef("%s: -id and -before take a job id", cmd)
	}
	s := dbqueue.Search{ID: *a.id, UUID: *a.uuid, Name: *a.name, Queue: queue, Text: *a.text, Scan: *a.scan, BeforeID: *a.before, Limit: limit}
	if s == (dbqueue.Search{Scan: s.Scan, Limit: s.Limit, BeforeID: s.BeforeID}) {
		return s, usagef("%s: say what to look for: -id, -uuid, -name, -queue or -text", cmd)
	}
	return s, nil
}

// searchResultJSON is a search as -json prints it.
type searchResultJSON[T any] struct {
	Matches  []T   `json:"matches"`
	Scanned  int   `json:"scanned"`
	OldestID int64 `json:"oldest_id"`
	Complete bool  `json:"complete"`
}

func searchJSON[T any](matches []T, scanned int, oldest int64, complete bool) searchResultJSON[T] {
	if matches == nil {
		matches = []T{}
	}
	return searchResultJSON[T]{Matches: matches, Scanned: scanned, OldestID: oldest, Complete: complete}
}

// searchNote tells the operator, on stderr, how much a search read: a
// search reads a window of the newest rows, and says where to go on: from
// its last match when it stopped at -limit, so paging with -before skips
// no match. direct is a search by a key that reads no window (an id, a
// failed job's uuid).
func (c *cli) searchNote(what string, s dbqueue.Search, direct bool, scanned int, oldest int64, complete bool, found int) {
	switch {
	case direct:
		fmt.Fprintf(c.errOut, "%d found by id or uuid\n", found)
	case complete:
		fmt.Fprintf(c.errOut, "%d found; read the newest %d %s, which is all of them\n", found, scanned, what)
	case found == s.Limit:
		fmt.Fprintf(c.errOut, "%d found; stopped at -limit %d after reading the newest %d %s (ids from %d): more may match, search on with -before %d\n", found, s.Limit, scanned, what, oldest, oldest)
	default:
		fmt.Fprintf(c.errOut, "%d found; read only the newest %d %s (ids from %d): search older ones with -before %d\n", found, scanned, what, oldest, oldest)
	}
}
