package sqldb

import (
	"strconv"
	"strings"
)

// Dialect names a SQL dialect.
type Dialect string

// The supported dialects.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
	SQLite   Dialect = "sqlite"
)

// Valid reports whether d is one of the supported dialects.
func (d Dialect) Valid() bool {
	switch d {
	case Postgres, MySQL, SQLite:
		return true
	}
	return false
}

// Now is the SQL expression for the database clock in Unix seconds.
func (d Dialect) Now() string {
	switch d {
	case Postgres:
		return "CAST(floor(EXTRACT(EPOCH FROM now())) AS bigint)"
	case MySQL:
		return "UNIX_TIMESTAMP()"
	default:
		return "CAST(strftime('%s','now') AS INTEGER)"
	}
}

// Epoch is the SQL expression turning a timestamp column into Unix seconds.
func (d Dialect) Epoch(col string) string {
	switch d {
	case Postgres:
		return "CAST(floor(EXTRACT(EPOCH FROM CAST(" + col + " AS timestamptz))) AS bigint)"
	case MySQL:
		return "UNIX_TIMESTAMP(" + col + ")"
	default:
		return "CAST(strftime('%s'," + col + ") AS INTEGER)"
	}
}

// Timestamp is the SQL expression turning a Unix-seconds parameter into a
// value comparable with a timestamp column.
func (d Dialect) Timestamp(param string) string {
	switch d {
	case Postgres:
		return "to_timestamp(" + param + ")"
	case MySQL:
		return "FROM_UNIXTIME(" + param + ")"
	default:
		return "datetime(" + param + ",'unixepoch')"
	}
}

// Rebind rewrites '?' placeholders as $1, $2, … for PostgreSQL and returns
// the query unchanged for the others. Queries must not hold '?' in literals.
func (d Dialect) Rebind(query string) string {
	if d != Postgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// Ints writes ids as a literal list, "1,2,3", for IN lists of row ids the
// queue read from the database itself. Integers formatted here cannot carry
// SQL, and a literal list spares database/sql a boxed argument per id and
// the MySQL driver its interpolation pass over thousands of them.
func Ints(ids []int64) string {
	b := make([]byte, 0, 8*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

// IntTuples writes "(a1,b1,…),(a2,b2,…)" from columns of equal length, for
// row-constructor IN lists.
func IntTuples(cols ...[]int64) string {
	if len(cols) == 0 {
		return ""
	}
	out := make([]byte, 0, 8*len(cols)*len(cols[0]))
	for i := range cols[0] {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '(')
		for c, col := range cols {
			if c > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendInt(out, col[i], 10)
		}
		out = append(out, ')')
	}
	return string(out)
}

// List returns "?,?,…" with n placeholders, for IN lists.
func List(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
