package dialect

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/dbqueue/dbqueue/internal/sqldb"
)

// maxLiteralInsert bounds an INSERT that carries its values as literals,
// well under MySQL's smallest max_allowed_packet default (4 MiB on MySQL
// 5.7, 16 MiB on MariaDB and MySQL 8). Rows too large for it go as
// parameters, which the driver can send in pieces.
const maxLiteralInsert = 1 << 20

// Insert writes each chunk of rows as one INSERT and learns their ids.
//
// It counts a statement's ids from the first one the server reports,
// idStep apart, where the server promises a statement consecutive ids
// (MySQL 8 offers nothing else). Elsewhere — MariaDB with
// innodb_autoinc_lock_mode 2, which Galera requires — it reads them back
// with RETURNING, which costs MariaDB a result row per job: 4% of
// end-to-end throughput, measured.
//
// The values go in the statement as literals rather than as parameters
// for go-sql-driver/mysql to interpolate: the driver grows its buffer by
// doubling from 4 KiB for every statement over 256 KiB (a 1,000-row push
// is about 300 KiB) and copies the statement three times.
func (m *mysql) Insert(ctx context.Context, ex sqldb.Execer, rows []PushRow, _ bool) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	for chunk := range slices.Chunk(rows, insertChunk) {
		query, args := m.insertText(chunk)
		if m.returning {
			rs, err := ex.Query(ctx, query+" RETURNING id", args...)
			got, err := scanInts(rs, err, m.ints)
			if err != nil {
				return nil, err
			}
			if len(got) != len(chunk) {
				return nil, errors.New("insert returned " + strconv.Itoa(len(got)) + " ids for " + strconv.Itoa(len(chunk)) + " rows")
			}
			slices.Sort(got) // ids are drawn in VALUES order
			ids = append(ids, got...)
			continue
		}
		res, err := ex.Exec(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		for i := range chunk {
			ids = append(ids, res.LastInsertID+int64(i)*m.idStep)
		}
	}
	return ids, nil
}

// insertText is insertSQL with every value written into the statement,
// or insertSQL itself for rows whose literals would pass maxLiteralInsert.
func (m *mysql) insertText(rows []PushRow) (string, []any) {
	const head = " (queue, payload, attempts, reserved_at, available_at, created_at) VALUES "
	size := len("INSERT INTO ") + len(m.jobs) + len(head)
	for _, r := range rows {
		// Both texts at their longest (hex), the rest of the row at most 64.
		size += 2*len(r.Queue) + 2*len(r.Payload) + 2*len(m.now) + 64
	}
	if size > maxLiteralInsert {
		return m.insertSQL(rows)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString("INSERT INTO ")
	b.WriteString(m.jobs)
	b.WriteString(head)
	var queue, queueText string // the last row's queue, and as a literal
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == 0 || r.Queue != queue {
			var t strings.Builder
			writeMySQLText(&t, []byte(r.Queue))
			queue, queueText = r.Queue, t.String()
		}
		b.WriteByte('(')
		b.WriteString(queueText)
		b.WriteByte(',')
		writeMySQLText(&b, r.Payload)
		b.WriteString(",0,NULL,")
		if !r.Absolute {
			b.WriteString(m.now)
			b.WriteByte('+')
		}
		var n [20]byte
		b.Write(strconv.AppendInt(n[:0], r.At, 10))
		b.WriteByte(',')
		b.WriteString(m.now)
		b.WriteByte(')')
	}
	return b.String(), nil
}

// writeMySQLText writes s as a string literal that reads the same
// whatever the session's sql_mode: NO_BACKSLASH_ESCAPES changes what a
// backslash in quotes means, so text with one goes as a hex literal, and
// other text in quotes with its quotes doubled. JSON that dbqueue writes
// has a backslash only where a string holds a quote or a control
// character.
func writeMySQLText(b *strings.Builder, s []byte) {
	if bytes.IndexByte(s, '\\') >= 0 {
		b.WriteString("X'")
		var buf [512]byte
		for len(s) > 0 {
			n := min(len(s), len(buf)/2)
			b.Write(buf[:hex.Encode(buf[:], s[:n])])
			s = s[n:]
		}
		b.WriteByte('\'')
		return
	}
	b.WriteByte('\'')
	for {
		i := bytes.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		b.Write(s[:i+1])
		b.WriteByte('\'')
		s = s[i+1:]
	}
	b.Write(s)
	b.WriteByte('\'')
}
