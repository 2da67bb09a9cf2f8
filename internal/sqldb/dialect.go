package sqldb

import (
	"strconv"
	"strings"
)

// Rebind rewrites '?' placeholders as $1, $2, … (PostgreSQL). Queries must
// not hold '?' in literals.
func Rebind(query string) string {
	if !strings.Contains(query, "?") {
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

// List returns "?,?,…" with n placeholders, for IN lists.
func List(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
