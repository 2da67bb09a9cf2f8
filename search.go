package dbqueue

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbqueue/internal/dialect"
	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// Search bounds. A search reads at most Scan of the newest rows (by id),
// and gives up after SearchTimeout: an operator's search box is no way to
// read a whole table of large payloads.
const (
	DefaultSearchScan  = 10_000
	MaxSearchScan      = 100_000
	DefaultSearchLimit = 100
	MaxSearchLimit     = 1000
	SearchTimeout      = 10 * time.Second
)

// Search selects jobs for SearchJobs (and, in package failed, failed
// jobs for Store.Search). Zero fields select all; the fields given must
// all match.
type Search struct {
	// ID finds one job by id, without reading a window.
	ID int64
	// UUID finds the jobs whose payload uuid is this one.
	UUID string
	// Name finds the jobs of one handler name (Payload.Name: Laravel's
	// displayName, or its job).
	Name string
	// Queue keeps the jobs of one queue.
	Queue string
	// Text finds the jobs whose payload, as stored (JSON text), holds
	// this text byte for byte, and, when the queue has a Redactor, still
	// holds it once redacted: a redacted value cannot be found by
	// guessing it. Package failed also matches the exception.
	Text string
	// Scan is how many of the newest rows (ids below BeforeID) the search
	// reads: DefaultSearchScan when 0, at most MaxSearchScan.
	Scan int
	// BeforeID starts the window below this id: pass the last result's
	// SearchResult.Oldest to search older rows (the rows below its last
	// match, when it stopped at Limit).
	BeforeID int64
	// Limit is the most matches returned: DefaultSearchLimit when 0, at
	// most MaxSearchLimit.
	Limit int
}

// check fills a Search's defaults and refuses values out of bounds.
func (s Search) check() (Search, error) {
	switch {
	case s.Scan == 0:
		s.Scan = DefaultSearchScan
	case s.Scan < 0 || s.Scan > MaxSearchScan:
		return s, fmt.Errorf("dbqueue: search: Scan %d: read from 1 to %d rows at a time (page with BeforeID)", s.Scan, MaxSearchScan)
	}
	switch {
	case s.Limit == 0:
		s.Limit = DefaultSearchLimit
	case s.Limit < 0 || s.Limit > MaxSearchLimit:
		return s, fmt.Errorf("dbqueue: search: Limit %d: must be from 1 to %d", s.Limit, MaxSearchLimit)
	}
	if s.ID < 0 || s.BeforeID < 0 {
		return s, fmt.Errorf("dbqueue: search: negative id")
	}
	return s, nil
}

// filter is the database's part of a search: the texts every matching
// payload holds (the uuid, the name's longest plain run, the text),
// checked exactly by matches afterwards.
func (s Search) filter() dialect.SearchFilter {
	f := dialect.SearchFilter{ID: s.ID, Queue: s.Queue, Scan: s.Scan, BeforeID: s.BeforeID, Limit: s.Limit}
	for _, text := range []string{s.UUID, plainRun(s.Name), s.Text} {
		if text != "" {
			f.Contains = append(f.Contains, text)
		}
	}
	return f
}

// fieldsMatch reports whether a payload found by filter has the uuid and
// name asked for, exactly.
func (s Search) fieldsMatch(p Payload) bool {
	return (s.UUID == "" || p.UUID == s.UUID) && (s.Name == "" || p.Name() == s.Name)
}

// textIn reports whether one of texts (the payload as the caller will
// show it, redacted) holds the text asked for.
func (s Search) textIn(texts ...[]byte) bool {
	if s.Text == "" {
		return true
	}
	for _, t := range texts {
		if bytes.Contains(t, []byte(s.Text)) {
			return true
		}
	}
	return false
}

// plainRun is the longest run of letters, digits and underscores in s:
// text a JSON encoder writes as it is, so a payload holding s as a string
// holds it too, however the encoder escaped the rest.
func plainRun(s string) string {
	best, start := "", -1
	for i := 0; i <= len(s); i++ {
		plain := i < len(s) && (s[i] == '_' || s[i] >= '0' && s[i] <= '9' || s[i]|0x20 >= 'a' && s[i]|0x20 <= 'z')
		switch {
		case plain && start < 0:
			start = i
		case !plain && start >= 0:
			if i-start > len(best) {
				best = s[start:i]
			}
			start = -1
		}
	}
	return best
}

// SearchResult is what a search found, and how much it read.
type SearchResult[T any] struct {
	// Matches are the rows found, newest first.
	Matches []T
	// Scanned is how many rows the search read (0 for a search by ID or,
	// in package failed, by UUID, which read only that row); Oldest the
	// smallest id among them. A search that stopped at Limit read only
	// down to its last match: Oldest is that match's id and Scanned the
	// rows from there up. Complete is true when the search read down to
	// the table's oldest row: nothing older is left to search. Otherwise
	// pass Oldest as BeforeID to search further back: the pages, until
	// one is Complete, return every match once, none skipped.
	Scanned  int
	Oldest   int64
	Complete bool
}

// newSearchResult is a SearchResult for the window a search read.
func newSearchResult[T any](matches []T, w dialect.Window, direct bool) SearchResult[T] {
	return SearchResult[T]{Matches: matches, Scanned: w.Rows, Oldest: w.Oldest, Complete: direct || !w.More}
}

// SearchJobs finds jobs in the jobs table by id, uuid, name, queue and
// payload text, reading at most s.Scan of the newest rows. Payloads are
// redacted as Jobs redacts them; Errors are left nil (Job reads them).
func (q *Queue) SearchJobs(ctx context.Context, s Search) (SearchResult[JobInfo], error) {
	s, err := s.check()
	if err != nil {
		return SearchResult[JobInfo]{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, SearchTimeout)
	defer cancel()
	var out []JobInfo
	w, err := q.sql.SearchJobs(ctx, q.db, s.filter(), func(r dialect.StatedRow) bool {
		info := q.newJobInfo(r)
		if !s.fieldsMatch(info.Payload) || !s.textIn(info.RawPayload) {
			return false
		}
		out = append(out, info)
		return true
	})
	if err != nil {
		return SearchResult[JobInfo]{}, sqldb.Wrap("search jobs", err)
	}
	return newSearchResult(out, w, s.ID > 0), nil
}

// searchFailed is SearchJobs on failed_jobs, for package failed (through
// workerOps): the rows come back as stored, for the store to redact as it shows
// them; they matched once redacted.
func (q *Queue) searchFailed(ctx context.Context, s Search) ([]dialect.FailedRow, SearchResult[struct{}], error) {
	uuid := s.UUID
	s, err := s.check()
	if err != nil {
		return nil, SearchResult[struct{}]{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, SearchTimeout)
	defer cancel()
	f := s.filter()
	f.UUID = uuid
	if uuid != "" {
		// The uuid is failed_jobs' own column: no payload text to look for.
		f.Contains = f.Contains[1:]
	}
	var out []dialect.FailedRow
	w, err := q.sql.SearchFailed(ctx, q.db, f, func(r dialect.FailedRow) bool {
		p, _ := DecodePayload(r.Payload)
		p.UUID = r.UUID // failed_jobs' own column
		if !s.fieldsMatch(p) || !s.textIn(q.Redact(p.Name(), r.Payload), []byte(r.Exception)) {
			return false
		}
		out = append(out, r)
		return true
	})
	if err != nil {
		return nil, SearchResult[struct{}]{}, sqldb.Wrap("search failed jobs", err)
	}
	return out, newSearchResult[struct{}](nil, w, s.ID > 0 || uuid != ""), nil
}
