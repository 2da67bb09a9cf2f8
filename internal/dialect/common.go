package dialect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// jobColumns is what every read of a claimed row selects, in scanJob's order.
const jobColumns = "id, queue, payload, attempts, reserved_at, available_at, created_at, reservation_token"

// claimSet is the SET list of every claim but reserved_at, which the
// claim sets after it: draw a new reservation token (with AbandonedMark
// as claimToken says), and count the attempt (never past MaxAttempts).
// The token comes first and reserved_at last because MySQL assigns left
// to right, each expression reading the columns assigned before it: the
// token must read reserved_at as the claim found it.
var claimSet = "reservation_token = reservation_token + 1 - (reservation_token & " + strconv.FormatInt(AbandonedMark|carryMark, 10) + ")" +
	" + CASE WHEN reserved_at IS NOT NULL OR (reservation_token & " + carry + ") <> 0 THEN " + abandoned + " ELSE 0 END" +
	", attempts = CASE WHEN attempts < " + strconv.Itoa(MaxAttempts) + " THEN attempts + 1 ELSE attempts END"

// Whether a reservation follows an abandoned attempt, kept in bits of the
// reservation token (as ErrorHistoryMark is). A job reserved with more
// attempts than its tries got there in one of two ways: its last holder
// stopped while running it (killed, crashed: the reservation ran out and
// a claim took it over), or its last try ended in a release (a handler's
// ReleaseAfter, a middleware's, a Laravel worker's $this->release()). A
// worker gives only the first more runs (worker.Options.AbandonedRetries)
// and fails the second without running it, as Laravel fails both; the
// mark tells them apart.
//
// The low bits of the token grow by one with every claim, give-back and
// transactional release, so no two reservations of a row share a token
// whatever the marks do. Laravel's workers never write the token: a row a
// PHP worker released is a new row, with no mark, and a reservation a PHP
// worker abandoned gets the mark from the claim that takes it over.
const (
	// AbandonedMark is set by a claim that takes over an expired
	// reservation, or that takes a row given back (or snoozed) by a
	// reservation that had the mark: a give-back takes its attempt back,
	// so the attempts it leaves follow the abandoned one still. Any other
	// claim clears it: the row was released, or pushed.
	AbandonedMark int64 = 1 << 49
	// carryMark is set on the row by a give-back or snooze of a
	// reservation with AbandonedMark, for the next claim to keep it.
	carryMark int64 = 1 << 50
)

var (
	abandoned = strconv.FormatInt(AbandonedMark, 10)
	carry     = strconv.FormatInt(carryMark, 10)
	// giveBackToken is the token a give-back or snooze writes: a new one,
	// carrying the reservation's AbandonedMark to the next claim.
	giveBackToken = "reservation_token + 1 - (reservation_token & " + carry + ")" +
		" + CASE WHEN (reservation_token & " + abandoned + ") <> 0 THEN " + carry + " ELSE 0 END"
)

// FollowsAbandoned reports whether a reservation's token says it follows
// an abandoned attempt (AbandonedMark).
func FollowsAbandoned(token int64) bool { return token&AbandonedMark != 0 }

// claimToken is the token claimSet writes over token on a row that was
// reserved (an expired reservation) or not: for a claim that computes it
// in Go as well (MySQL has no UPDATE … RETURNING).
func claimToken(token int64, reserved bool) int64 {
	t := token + 1 - token&(AbandonedMark|carryMark)
	if reserved || token&carryMark != 0 {
		t += AbandonedMark
	}
	return t
}

// insertChunk bounds the rows of one INSERT (PostgreSQL allows 65,535
// parameters; each row takes three).
const insertChunk = 1000

// common is the SQL every database shares, and the hooks where they differ.
type common struct {
	name   string
	tables Tables
	now    string // the database clock in Unix seconds
	// epoch turns a timestamp column into Unix seconds (UTC); timestamp
	// turns a Unix-seconds expression into a value comparable with one.
	epoch, timestamp func(string) string
	upsert           string // suffix of INSERT INTO signals … for a conflict
	failInsert       string
	jobs, failed     string // qualified table names
	signals          string
	// held is the ownership predicate on id, token, attempts parameters.
	held string
	// rebinder rewrites '?' placeholders (PostgreSQL's $n).
	rebinder func(string) string
	// ints scans integer columns (plainInt but on MySQL).
	ints intDest
	// noHistory: the error history table is missing (see probeHistory).
	noHistory bool
	spelling
}

// spelling is how a database writes the parts that differ inside the
// statements the shared files build. Each dialect's constructor, in its
// own file, fills every field, so no shared file asks which database it
// is writing for (TestSharedFilesNameNoDatabase keeps it so).
type spelling struct {
	// intDiv is integer division, a / b for non-negative operands.
	intDiv func(a, b string) string
	// sumInt sums an integer column into an integer.
	sumInt func(col string) string
	// contains tests that column col holds a parameter's text, byte for
	// byte (never by a collation's idea of equal).
	contains func(col string) string
	// least is the scalar minimum of its arguments.
	least string
	// lockRead is the suffix of a read that locks rows; shareRead that of
	// a read that must see the newest committed rows whatever the
	// transaction's isolation.
	lockRead, shareRead string
	// lockTx are the options of the transaction LockReservation reads in.
	lockTx sqldb.TxOptions
	// skipTaken is an INSERT INTO table (cols) VALUES values that inserts
	// nothing when a row holds its key, and counts 1 for a row inserted
	// and 0 for one skipped, whatever the DSN's flags.
	skipTaken func(table, cols, values, key string) string
	// keepTaken is the suffix of an INSERT that leaves a row holding its
	// key as it is (and locked, where the database locks it); takenCounts
	// says the INSERT's rows-affected count then is 0, so a count of 1
	// proves an insert (MySQL's clientFoundRows makes it 1 either way).
	keepTaken   func(key string) string
	takenCounts bool
	// replaceTaken is the suffix of an INSERT that sets cols of the row
	// holding key to the values the INSERT gives; addTaken is the INSERT's
	// head (into table, with the alias m where the suffix needs one) and
	// the suffix that adds them to those already there instead.
	replaceTaken func(key string, cols []string) string
	addTaken     func(table, key string, cols []string) (into, set string)
	// replaceNewer is the head and suffix of an INSERT that, where a row
	// holds key, sets cols and by to the INSERT's values only when the
	// INSERT's by is greater than the row's (or the row's is NULL): a
	// late writer of an older value changes nothing.
	replaceNewer func(table, key, by string, cols []string) (into, set string)
	// deleteFirst deletes the rows of table that match where, at most
	// as many as tail ("[ORDER BY …] LIMIT …") keeps; key is the primary
	// key's columns.
	deleteFirst func(table, key, where, tail string) string
	// topJoin: SumMetricGroups with a Top ranks the groups, then joins
	// back to sum every column of those it keeps (see topQuery), rather
	// than ranking and summing in one pass.
	topJoin bool
}

// The clauses below are spelled alike by PostgreSQL and SQLite, whose
// spellings use them.

func onConflictNothing(key string) string { return " ON CONFLICT (" + key + ") DO NOTHING" }

func insertOnConflictNothing(table, cols, values, key string) string {
	return "INSERT INTO " + table + " (" + cols + ") VALUES " + values + onConflictNothing(key)
}

func onConflictReplace(key string, cols []string) string {
	set := make([]string, len(cols))
	for i, col := range cols {
		set[i] = col + " = excluded." + col
	}
	return " ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(set, ", ")
}

func onConflictReplaceNewer(table, key, by string, cols []string) (into, set string) {
	sets := make([]string, 0, len(cols)+1)
	for _, col := range append(cols, by) {
		sets = append(sets, col+" = excluded."+col)
	}
	return "INSERT INTO " + table + " AS m", " ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(sets, ", ") +
		" WHERE m." + by + " IS NULL OR m." + by + " < excluded." + by
}

func onConflictAdd(table, key string, cols []string) (into, set string) {
	sums := make([]string, len(cols))
	for i, col := range cols {
		sums[i] = col + " = m." + col + " + excluded." + col
	}
	return "INSERT INTO " + table + " AS m", " ON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(sums, ", ")
}

// deleteInFirst deletes the rows a subquery with the LIMIT selects.
func deleteInFirst(table, key, where, tail string) string {
	in := key
	if strings.Contains(key, ",") {
		in = "(" + key + ")"
	}
	return "DELETE FROM " + table + " WHERE " + in + " IN (SELECT " + key + " FROM " + table + " WHERE " + where + tail + ")"
}

func slashDiv(a, b string) string { return "(" + a + ") / " + b }

func newCommon(name string, t Tables, now string, epoch, timestamp func(string) string) *common {
	c := &common{
		name: name, tables: t, now: now, epoch: epoch, timestamp: timestamp,
		jobs: t.JobsTable(), failed: t.FailedTable(), signals: t.SignalsTable(),
		// (reserved_at + 0): a PostgreSQL planner whose statistics saw no
		// reserved row would read the row through the partial index of
		// reserved rows, every one of them, instead of the primary key.
		held:     " WHERE id = ? AND reservation_token = ? AND attempts = ? AND (reserved_at + 0) IS NOT NULL",
		rebinder: func(q string) string { return q },
		ints:     plainInt,
	}
	return c
}

func (c *common) Name() string           { return c.name }
func (c *common) Tables() Tables         { return c.tables }
func (c *common) Now() string            { return c.now }
func (c *common) Rebind(q string) string { return c.rebinder(q) }
func (c *common) NotifyChannel() string  { return "" }

func (c *common) FailedTxOptions() sqldb.TxOptions { return sqldb.TxOptions{} }

// heldWhere matches the rows still held by the reservations given: one
// id list per (token, attempts) — usually one for a whole batch, whose
// jobs were claimed once — so every database reads the primary key, and
// checks no list of tuples (on MariaDB that list cost ~4 µs a job).
func heldWhere(held []Held) string {
	type group struct {
		token    int64
		attempts int
	}
	var (
		order []group
		ids   = map[group][]int64{}
	)
	for _, h := range held {
		g := group{h.Token, h.Attempts}
		if _, ok := ids[g]; !ok {
			order = append(order, g)
		}
		ids[g] = append(ids[g], h.ID)
	}
	b := make([]byte, 0, 64+12*len(held))
	b = append(b, " WHERE reserved_at IS NOT NULL AND ("...)
	for i, g := range order {
		if i > 0 {
			b = append(b, " OR "...)
		}
		b = append(b, "(reservation_token = "...)
		b = strconv.AppendInt(b, g.token, 10)
		b = append(b, " AND attempts = "...)
		b = strconv.AppendInt(b, int64(g.attempts), 10)
		b = append(b, " AND id IN ("...)
		b = append(b, sqldb.Ints(ids[g])...)
		b = append(b, "))"...)
	}
	return string(append(b, ')'))
}

func collectKeys(rows sqldb.Rows, err error) (map[Key]bool, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := map[Key]bool{}
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.ID, &k.Token); err != nil {
			return nil, err
		}
		keys[k] = true
	}
	return keys, rows.Err()
}

func scanJob(rows sqldb.Rows, extra ...any) (JobRow, error) {
	var (
		r        JobRow
		reserved sql.NullInt64
		att      int64
	)
	dest := append([]any{&r.ID, &r.Queue, &r.Payload, &att, &reserved, &r.AvailableAt, &r.CreatedAt, &r.Token}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return r, err
	}
	r.Attempts = int(att)
	r.ReservedAt, r.Reserved = reserved.Int64, reserved.Valid
	return r, nil
}

// claimColumns is what a claim returns: jobColumns without the queue,
// which is the claim's own, and with reserved_at never NULL.
const claimColumns = "id, payload, attempts, reserved_at, available_at, created_at, reservation_token"

// collectClaim reads the rows a claim of at most n rows from queue
// returned (claimColumns, then extra). The rows slice comes from a pool
// (give it back with RecycleRows).
func collectClaim(rs sqldb.Rows, err error, queue string, n int, extra ...any) ([]JobRow, error) {
	rows, err := appendClaimed(claimRows(n), rs, err, queue, plainInt, extra...)
	if err == nil && len(rows) > n {
		return nil, fmt.Errorf("dbqueue: a claim of %d rows returned %d", n, len(rows))
	}
	return rows, err
}

// appendClaimed appends claimed rows (claimColumns, then extra) to rows.
// One set of scan targets serves every row, and the payloads share
// blocks (payloadArena), so a claim allocates a few blocks and little
// else.
func appendClaimed(rows []JobRow, rs sqldb.Rows, err error, queue string, ints intDest, extra ...any) ([]JobRow, error) {
	if err != nil {
		return rows, err
	}
	defer rs.Close()
	var (
		r       JobRow
		att     int64
		payload payloadArena
	)
	dest := append([]any{ints(&r.ID), &payload, ints(&att), ints(&r.ReservedAt), ints(&r.AvailableAt), ints(&r.CreatedAt), ints(&r.Token)}, extra...)
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return rows, err
		}
		r.Payload, r.Queue, r.Attempts, r.Reserved = payload.last, queue, int(att), true
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

// rowsPool holds the rows slices of claims that were read.
var rowsPool sync.Pool

// claimRows is an empty rows slice with room for n.
func claimRows(n int) []JobRow {
	if p, ok := rowsPool.Get().(*[]JobRow); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]JobRow, 0, max(n, maxClaim))
}

// RecycleRows gives a claim's rows slice back once its rows are read; it
// keeps no payload alive.
func RecycleRows(rows []JobRow) {
	if cap(rows) < maxClaim {
		return
	}
	clear(rows[:cap(rows)])
	rows = rows[:0]
	rowsPool.Put(&rows)
}

// scanKeys reads (id, reservation_token) rows, at most n, into a slice: a
// finish checks its count and builds a set only when some reservation was
// lost.
func scanKeys(rows sqldb.Rows, err error, n int, ints intDest) ([]Key, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := make([]Key, 0, n)
	var k Key
	dest := []any{ints(&k.ID), ints(&k.Token)}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// intDest is how a dialect's driver scans an integer column into *p.
type intDest func(p *int64) any

// plainInt scans into the pointer itself.
func plainInt(p *int64) any { return p }

func scanInts(rows sqldb.Rows, err error, ints intDest) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		ids  []int64
		id   int64
		dest = ints(&id)
	)
	for rows.Next() {
		if err := rows.Scan(dest); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// claimArms are the two halves of every claim: reservations that expired
// (their holder died) and ready rows, each in claim order.
func (c *common) claimArms() (expired, ready string) {
	expired = "queue = ? AND reserved_at IS NOT NULL AND reserved_at <= " + c.now + " - ? ORDER BY reserved_at LIMIT ?"
	ready = "queue = ? AND reserved_at IS NULL AND available_at <= " + c.now + " ORDER BY available_at, id LIMIT ?"
	return expired, ready
}

// deleteHeldReturning is DeleteHeld where DELETE … RETURNING exists.
func (c *common) deleteHeldReturning(ctx context.Context, db sqldb.DB, held []Held) ([]Key, error) {
	rows, err := db.Query(ctx, "DELETE FROM "+c.jobs+heldWhere(held)+" RETURNING id, reservation_token")
	keys, err := scanKeys(rows, err, len(held), c.ints)
	if err != nil || !anyMarked(held) {
		return keys, err
	}
	// A second statement (MariaDB, and SQLite's rare fallback): history
	// it leaves behind when it fails is PruneErrors'.
	_ = c.dropMarked(ctx, db, keys)
	return keys, nil
}

// releaseSet is the SET list of a batched release: per-row delays, and
// per-row payloads as arguments where given.
func (c *common) releaseSet(rs []Release) (string, []any) {
	var b strings.Builder
	b.WriteString(unreserve + ", available_at = " + c.now + " + CASE id")
	for _, r := range rs {
		b.WriteString(" WHEN " + strconv.FormatInt(r.ID, 10) + " THEN " + strconv.FormatInt(r.Delay, 10))
	}
	b.WriteString(" END")
	var args []any
	for _, r := range rs {
		if r.Payload == nil {
			continue
		}
		if args == nil {
			b.WriteString(", payload = CASE id")
		}
		b.WriteString(" WHEN " + strconv.FormatInt(r.ID, 10) + " THEN ?")
		args = append(args, string(r.Payload))
	}
	if args != nil {
		b.WriteString(" ELSE payload END")
	}
	return b.String(), args
}

func helds(rs []Release) []Held {
	out := make([]Held, len(rs))
	for i, r := range rs {
		out[i] = r.Held
	}
	return out
}

func (c *common) GiveBack(ctx context.Context, db sqldb.DB, h Held) (bool, error) {
	// A give-back takes the attempt back and draws a new token, so one
	// retried after a lost reply never matches a later claim, ours or a PHP
	// worker's (which counts attempts and leaves the token alone).
	res, err := db.Exec(ctx, c.rebind("UPDATE "+c.jobs+" SET "+unreserve+", attempts = attempts - 1, reservation_token = "+giveBackToken+c.held),
		h.ID, h.Token, h.Attempts)
	return res.RowsAffected > 0, err
}

// rebind passes common's '?' SQL through the database's placeholders.
func (c *common) rebind(q string) string { return c.rebinder(q) }

func (c *common) FailMove(ctx context.Context, db sqldb.DB, h Held, f Failure) (bool, error) {
	held := false
	err := sqldb.InTx(ctx, db, sqldb.TxOptions{}, func(tx sqldb.Tx) error {
		res, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.jobs+c.held), h.ID, h.Token, h.Attempts)
		if err != nil {
			return err
		}
		if res.RowsAffected == 0 {
			held = false
			return nil
		}
		held = true
		if _, err = tx.Exec(ctx, c.rebind(c.failInsert), f.UUID, f.Connection, f.Queue, string(f.Payload), f.Exception); err != nil {
			return err
		}
		return c.moveHistory(ctx, tx, h, f.UUID)
	})
	return held, err
}

func (c *common) FailedAlready(ctx context.Context, db sqldb.DB, id int64, f Failure) (bool, error) {
	var n int64
	if err := db.QueryRow(ctx, c.rebind("SELECT COUNT(*) FROM "+c.jobs+" WHERE id = ?"), id).Scan(&n); err != nil || n > 0 {
		return false, err
	}
	err := db.QueryRow(ctx, c.rebind("SELECT COUNT(*) FROM "+c.failed+" WHERE uuid = ? AND exception = ? AND payload = ?"),
		f.UUID, f.Exception, string(f.Payload)).Scan(&n)
	return n > 0, err
}

// insertSQL builds a multi-row INSERT. Each row's available_at is the
// database's now plus a delay, or an absolute time.
func (c *common) insertSQL(rows []PushRow) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(rows))
	b.WriteString("INSERT INTO " + c.jobs + " (queue, payload, attempts, reserved_at, available_at, created_at) VALUES ")
	for i, row := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		if row.Absolute {
			b.WriteString("(?, ?, 0, NULL, ?, " + c.now + ")")
		} else {
			b.WriteString("(?, ?, 0, NULL, " + c.now + " + ?, " + c.now + ")")
		}
		args = append(args, row.Queue, string(row.Payload), row.At)
	}
	return b.String(), args
}

func (c *common) Sizes(ctx context.Context, ex sqldb.Execer, queue string) (Sizes, error) {
	var (
		s      Sizes
		oldest sql.NullInt64
	)
	err := ex.QueryRow(ctx, c.rebind(`SELECT
  COALESCE(SUM(CASE WHEN reserved_at IS NULL AND available_at <= `+c.now+` THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN reserved_at IS NULL AND available_at > `+c.now+` THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN reserved_at IS NOT NULL THEN 1 ELSE 0 END), 0),
  MIN(CASE WHEN reserved_at IS NULL AND available_at <= `+c.now+` THEN available_at END),
  `+c.now+`
FROM `+c.jobs+` WHERE queue = ?`), queue).Scan(&s.Pending, &s.Delayed, &s.Reserved, &oldest, &s.Now)
	if oldest.Valid {
		v := oldest.Int64
		s.OldestPending = &v
	}
	return s, err
}

// SizesByQueue reads waiting rows and reserved rows apart, each by a
// grouped read that the index of its kind covers (PostgreSQL's and
// SQLite's partial indexes, MySQL's (queue, reserved_at, available_at)):
// the index entries are read, never the rows and their payloads.
func (c *common) SizesByQueue(ctx context.Context, ex sqldb.Execer) ([]QueueSizes, error) {
	var out []QueueSizes
	err := c.eachRow(ctx, ex, `SELECT queue,
  COALESCE(SUM(CASE WHEN available_at <= `+c.now+` THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN available_at > `+c.now+` THEN 1 ELSE 0 END), 0),
  MIN(CASE WHEN available_at <= `+c.now+` THEN available_at END),
  `+c.now+`
FROM `+c.jobs+` WHERE reserved_at IS NULL GROUP BY queue ORDER BY queue`, nil, func(scan func(...any) error) error {
		var (
			s      QueueSizes
			oldest sql.NullInt64
		)
		if err := scan(&s.Queue, &s.Pending, &s.Delayed, &oldest, &s.Now); err != nil {
			return err
		}
		if oldest.Valid {
			v := oldest.Int64
			s.OldestPending = &v
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	reserved := map[string]int64{}
	err = c.eachRow(ctx, ex, "SELECT queue, COUNT(*) FROM "+c.jobs+" WHERE reserved_at IS NOT NULL GROUP BY queue", nil,
		func(scan func(...any) error) error {
			var (
				name string
				n    int64
			)
			if err := scan(&name, &n); err != nil {
				return err
			}
			reserved[name] = n
			return nil
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Reserved = reserved[out[i].Queue]
		delete(reserved, out[i].Queue)
	}
	if len(reserved) > 0 { // queues whose every row is reserved
		for name, n := range reserved {
			out = append(out, QueueSizes{Queue: name, Sizes: Sizes{Reserved: n}})
		}
		slices.SortFunc(out, func(a, b QueueSizes) int { return strings.Compare(a.Queue, b.Queue) })
	}
	return out, nil
}

// eachRow runs a query with args and calls fn with each row's Scan.
func (c *common) eachRow(ctx context.Context, ex sqldb.Execer, query string, args []any, fn func(scan func(...any) error) error) error {
	rows, err := ex.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (c *common) Clear(ctx context.Context, ex sqldb.Execer, queue string) (int64, error) {
	if err := c.dropQueueHistory(ctx, ex, queue); err != nil {
		return 0, err
	}
	res, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.jobs+" WHERE queue = ?"), queue)
	return res.RowsAffected, err
}

func (c *common) Queues(ctx context.Context, ex sqldb.Execer) ([]string, error) {
	rows, err := ex.Query(ctx, "SELECT DISTINCT queue FROM "+c.jobs+" ORDER BY queue")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

func (c *common) Payloads(ctx context.Context, ex sqldb.Execer, queue string) ([][]byte, error) {
	rows, err := ex.Query(ctx, c.rebind("SELECT payload FROM "+c.jobs+" WHERE queue = ? ORDER BY id"), queue)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// failedBefore is the predicate "failed_at is earlier than the Unix time
// expr". PostgreSQL and MySQL compare the column itself so the failed_at
// index serves it; SQLite converts the column (see sqlite.go).
func (c *common) failedBefore(expr string) string {
	return "failed_at < " + c.timestamp(expr)
}

// failedWhere builds the WHERE of a FailedFilter, with its arguments.
func (c *common) failedWhere(f FailedFilter, before func(string) string) (string, []any) {
	where := []string{"1 = 1"}
	var args []any
	if len(f.UUIDs) > 0 {
		where = append(where, "uuid IN ("+sqldb.List(len(f.UUIDs))+")")
		for _, u := range f.UUIDs {
			args = append(args, u)
		}
	}
	if f.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, f.Queue)
	}
	if f.Connection != "" {
		where = append(where, "connection = ?")
		args = append(args, f.Connection)
	}
	if f.AfterID > 0 {
		where = append(where, "id > ?")
		args = append(args, f.AfterID)
	}
	if f.UpToID > 0 {
		where = append(where, "id <= ?")
		args = append(args, f.UpToID)
	}
	if f.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, f.BeforeID)
	}
	if f.OlderThan > 0 {
		where = append(where, before(c.now+" - ?"))
		args = append(args, f.OlderThan)
	}
	if f.FailedBefore != nil {
		where = append(where, before("?"))
		args = append(args, *f.FailedBefore)
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

func (c *common) failedSelect() string {
	return "SELECT id, uuid, connection, queue, payload, exception, " + c.epoch("failed_at") + " FROM " + c.failed
}

func scanFailed(rows sqldb.Rows, err error) ([]FailedRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FailedRow
	for rows.Next() {
		r, err := scanFailedRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanFailedRow reads one row of failedSelect's columns.
func scanFailedRow(rows sqldb.Rows) (FailedRow, error) {
	var (
		r  FailedRow
		at sql.NullInt64
	)
	if err := rows.Scan(&r.ID, &r.UUID, &r.Connection, &r.Queue, &r.Payload, &r.Exception, &at); err != nil {
		return r, err
	}
	r.Attempt = FailedAttempt(r.Payload)
	r.Payload = UnmarkFailed(r.Payload)
	if at.Valid {
		v := at.Int64
		r.FailedAt = &v
	}
	return r, nil
}

func (c *common) listFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter, before func(string) string) ([]FailedRow, error) {
	where, args := c.failedWhere(f, before)
	query := c.failedSelect() + where + " ORDER BY id DESC"
	if f.Limit > 0 {
		query += " LIMIT " + strconv.Itoa(f.Limit)
	}
	return scanFailed(ex.Query(ctx, c.rebind(query), args...))
}

func (c *common) ListFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) ([]FailedRow, error) {
	return c.listFailed(ctx, ex, f, c.failedBefore)
}

func (c *common) deleteFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter, before func(string) string) (int64, error) {
	where, args := c.failedWhere(f, before)
	if err := c.dropFailedHistory(ctx, ex, where, args); err != nil {
		return 0, err
	}
	res, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.failed+where), args...)
	return res.RowsAffected, err
}

func (c *common) DeleteFailed(ctx context.Context, ex sqldb.Execer, f FailedFilter) (int64, error) {
	return c.deleteFailed(ctx, ex, f, c.failedBefore)
}

func (c *common) MaxFailedID(ctx context.Context, ex sqldb.Execer) (int64, error) {
	var last sql.NullInt64
	err := ex.QueryRow(ctx, "SELECT MAX(id) FROM "+c.failed).Scan(&last)
	return last.Int64, err
}

// lockFailed reads failed rows in id order, with lock appended (" FOR
// UPDATE", or "" where the transaction already holds the database).
func (c *common) lockFailed(ctx context.Context, tx sqldb.Tx, f FailedFilter, lock string) ([]FailedRow, error) {
	where, args := c.failedWhere(f, c.failedBefore)
	query := c.failedSelect() + where + " ORDER BY id"
	if f.Limit > 0 {
		query += " LIMIT " + strconv.Itoa(f.Limit)
	}
	return scanFailed(tx.Query(ctx, c.rebind(query+lock), args...))
}

func (c *common) LockFailed(ctx context.Context, tx sqldb.Tx, f FailedFilter) ([]FailedRow, error) {
	return c.lockFailed(ctx, tx, f, " FOR UPDATE")
}

// retryFromFailed inserts rows into jobs, due now, with the dialect's
// own Insert (PostgreSQL's notifies), hands their error history to the
// new rows, and deletes them from failed_jobs.
func (c *common) retryFromFailed(ctx context.Context, tx sqldb.Tx, rows []FailedRow, insert insertFunc) error {
	for chunk := range slices.Chunk(rows, insertChunk/2) {
		push := make([]PushRow, len(chunk))
		ids := make([]any, len(chunk))
		for i, r := range chunk {
			push[i] = PushRow{Queue: r.Queue, Payload: r.Payload}
			ids[i] = r.ID
		}
		newIDs, err := insert(ctx, tx, push, true)
		if err != nil {
			return err
		}
		if err := c.historyBack(ctx, tx, chunk, newIDs); err != nil {
			return err
		}
		res, err := tx.Exec(ctx, c.rebind("DELETE FROM "+c.failed+" WHERE id IN ("+sqldb.List(len(ids))+")"), ids...)
		if err != nil {
			return err
		}
		if res.RowsAffected != int64(len(chunk)) {
			// Only a transaction that did not hold its rows gets here; roll
			// back rather than leave a job in both tables.
			return errors.New("failed_jobs changed during the retry: deleted " + strconv.FormatInt(res.RowsAffected, 10) +
				" of " + strconv.Itoa(len(chunk)) + " rows; nothing was retried")
		}
	}
	return nil
}

// bumpScale makes a bumped signal's new value: the database's clock in
// Unix seconds times a million, or one more than the old value when that
// is not less. Each bump changes the value, two in one second or with the
// clock set back included, and never to a plain Unix-second value, which
// builds before v0.1.0 wrote (CHANGELOG.md): workers of either version, which stop when the
// value changes, see every restart sent by either version.
const bumpScale = "1000000"

func (c *common) setSignal(ctx context.Context, ex sqldb.Execer, name string, value *int64, set, bump string) error {
	expr, args, upsert := "?", []any{name}, set
	if value != nil {
		args = append(args, *value)
	} else {
		expr, upsert = c.now+" * "+bumpScale, bump
	}
	_, err := ex.Exec(ctx, c.rebind("INSERT INTO "+c.signals+" (name, value) VALUES (?, "+expr+") "+upsert), args...)
	return err
}

func (c *common) SetSignal(ctx context.Context, ex sqldb.Execer, name string, value *int64) error {
	old := c.tables.SignalsName() + ".value"
	return c.setSignal(ctx, ex, name, value, "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
		"ON CONFLICT (name) DO UPDATE SET value = CASE WHEN excluded.value > "+old+" THEN excluded.value ELSE "+old+" + 1 END")
}

func (c *common) DeleteSignal(ctx context.Context, ex sqldb.Execer, name string) error {
	_, err := ex.Exec(ctx, c.rebind("DELETE FROM "+c.signals+" WHERE name = ?"), name)
	return err
}

func (c *common) Signals(ctx context.Context, ex sqldb.Execer, names []string) (map[string]int64, error) {
	if len(names) == 0 {
		return map[string]int64{}, nil // IN () is no statement on PostgreSQL and MySQL
	}
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := ex.Query(ctx, c.rebind("SELECT name, value FROM "+c.signals+" WHERE name IN ("+sqldb.List(len(names))+")"), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name  string
			value int64
		)
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, rows.Err()
}

func (c *common) CheckTables(ctx context.Context, ex sqldb.Execer) error {
	for _, query := range []string{
		"SELECT id, reservation_token, flow_name FROM " + c.jobs + " WHERE 1 = 0",
		"SELECT id FROM " + c.failed + " WHERE 1 = 0",
	} {
		rows, err := ex.Query(ctx, query)
		if err != nil {
			return err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
