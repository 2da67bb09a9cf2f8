package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/dbqueue/dbqueue"
)

// Widening is one column of an existing jobs table that Up made wider:
// Laravel's queue:table makes attempts a tinyint (MySQL) or smallint
// (PostgreSQL) and the times 32-bit integers; migration 00003 widens them
// in place.
type Widening struct {
	Table  string // the jobs table, as SQL names it
	Column string
	From   string // the column type before, as the catalog shows it
	To     string // the column type after
}

// String says what changed and why, e.g. "widened jobs.attempts from
// tinyint unsigned to int unsigned (Laravel's type overflows at 255)".
func (w Widening) String() string {
	s := fmt.Sprintf("widened %s.%s from %s to %s", w.Table, w.Column, w.From, w.To)
	if why := w.why(); why != "" {
		s += " (" + why + ")"
	}
	return s
}

// intLimits is the largest value of each narrow integer type.
var intLimits = map[string]string{
	"tinyint":            "127",
	"tinyint unsigned":   "255",
	"smallint":           "32767",
	"smallint unsigned":  "65535",
	"mediumint":          "8388607",
	"mediumint unsigned": "16777215",
	"int":                "2147483647",
	"integer":            "2147483647",
}

func (w Widening) why() string {
	switch w.Column {
	case "attempts":
		if limit, ok := intLimits[w.From]; ok {
			return "Laravel's type overflows at " + limit
		}
	case "reserved_at", "available_at", "created_at":
		switch w.From {
		case "int unsigned":
			return "Laravel's 32-bit Unix time overflows in 2106"
		case "int", "integer":
			return "Laravel's 32-bit Unix time overflows in 2038"
		}
	}
	return ""
}

// widenedColumns are the jobs columns migration 00003 may widen.
var widenedColumns = []string{"attempts", "reserved_at", "available_at", "created_at"}

var displayWidth = regexp.MustCompile(`\(\d+\)`)

// columnTypes reads the types of the jobs table's widenable columns; an
// empty map when the table does not exist (or on SQLite, where INTEGER is
// 64-bit already and nothing is widened).
func columnTypes(ctx context.Context, db *sql.DB, dialect dbqueue.Dialect, t Tables) (map[string]string, error) {
	var (
		query string
		args  []any
	)
	name := t.withDefaults().Jobs
	switch dialect {
	case dbqueue.MySQL:
		query = "SELECT column_name, column_type FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?"
		args = []any{name}
	case dbqueue.Postgres:
		query = "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1"
		args = []any{name}
		if t.Schema != "" {
			query = "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2"
			args = []any{t.Schema, name}
		}
	default:
		return map[string]string{}, nil
	}
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the column types of %s: %w", t.JobsTable(), err)
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var col, typ string
		if err := rows.Scan(&col, &typ); err != nil {
			return nil, fmt.Errorf("read the column types of %s: %w", t.JobsTable(), err)
		}
		col = strings.ToLower(col)
		for _, c := range widenedColumns {
			if col == c {
				// MariaDB shows display widths: tinyint(3) unsigned.
				types[col] = strings.Join(strings.Fields(displayWidth.ReplaceAllString(strings.ToLower(typ), "")), " ")
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the column types of %s: %w", t.JobsTable(), err)
	}
	return types, nil
}

// widenings lists the columns whose type changed between before and after.
func widenings(t Tables, before, after map[string]string) []Widening {
	var out []Widening
	for _, c := range widenedColumns {
		from, ok := before[c]
		to := after[c]
		if ok && to != "" && from != to {
			out = append(out, Widening{Table: t.JobsTable(), Column: c, From: from, To: to})
		}
	}
	return out
}
