package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/bench"
	"github.com/dbqueue/dbqueue/bench/dbqueueq"
)

// payload's flags.
var (
	payloadSize  = flag.String("size", "10KB,1MB", "payload: comma-separated job data sizes (KB = 1,000 bytes, MB = 1,000,000)")
	payloadTotal = flag.Int("payload-total", 200_000_000, "payload: bytes of job data per measurement (the job count is this over -size)")
)

// payloadSchema is payload's own schema or database.
const payloadSchema = "dbqueue_payload"

// payloadClaimBytes bounds the job data one claim holds in memory: a
// claim of 1,000 jobs of 1 MB would be a gigabyte. The worker's
// Concurrency and Prefetch are sized from it (see payloadWorker).
const payloadClaimBytes = 32_000_000

// plainTable is the table the plain INSERT/SELECT loop uses, beside jobs.
const plainTable = "bench_plain_payloads"

// parseSize reads "10KB", "1MB", "4000".
func parseSize(s string) (int, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mult := 1
	switch {
	case strings.HasSuffix(s, "MB"):
		mult, s = 1_000_000, strings.TrimSuffix(s, "MB")
	case strings.HasSuffix(s, "KB"):
		mult, s = 1_000, strings.TrimSuffix(s, "KB")
	case strings.HasSuffix(s, "B"):
		s = strings.TrimSuffix(s, "B")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("-size %q: give bytes, e.g. 10KB or 1MB", s)
	}
	return n * mult, nil
}

// payloadWorker is the worker for jobs of size bytes: a claim holds at
// most payloadClaimBytes of data, half of it running.
func payloadWorker(o dbqueueq.Options, size int) dbqueueq.Options {
	hold := max(2, min(2_000, payloadClaimBytes/size))
	o.Concurrency = min(100, max(1, hold/2))
	o.Prefetch = max(1, hold-o.Concurrency)
	return o
}

// payloadBatch is how many jobs one PushMany (and one plain INSERT)
// carries: about 4 MB, under MariaDB's default max_allowed_packet of 16 MB.
func payloadBatch(size int) int { return max(1, min(1_000, 4_000_000/size)) }

// runPayload pushes and works jobs whose data is -size bytes, and does
// the same bytes with a plain INSERT (same batches) and a plain SELECT of
// them back (keyset pages of one claim's size), in MB/s of job data.
func runPayload(ctx context.Context, c *config, d string) error {
	var sizes []int
	for s := range strings.SplitSeq(*payloadSize, ",") {
		n, err := parseSize(s)
		if err != nil {
			return err
		}
		sizes = append(sizes, n)
	}
	began, loadBefore := time.Now(), bench.LoadAvg()
	var version, title string
	var b strings.Builder
	var table strings.Builder
	table.WriteString("| job data | jobs | worker | dbqueue PushMany MB/s | plain INSERT MB/s | push ÷ INSERT | dbqueue work (claim + delete) MB/s | plain SELECT MB/s | work ÷ SELECT | dbqueue end to end MB/s |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, size := range sizes {
		o := payloadWorker(c.worker, size)
		o.Schema = payloadSchema
		sys, t, err := openDialect(ctx, c, d, o, soakSQLiteDSN(c.sqliteDSN))
		if err != nil {
			return err
		}
		title = t
		r, err := payloadOnce(ctx, c, d, sys, size)
		if version == "" && err == nil {
			version, err = sys.ServerVersion(ctx)
		}
		sys.Close()
		if err != nil {
			return fmt.Errorf("%d bytes: %w", size, err)
		}
		n := *payloadTotal / size
		fmt.Fprintf(&table, "| %s | %d | Concurrency %d, Prefetch %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f |\n",
			sizeText(size), n, o.Concurrency, o.Prefetch, median(r[0]), median(r[1]), median(r[0])/median(r[1]), median(r[2]), median(r[3]), median(r[2])/median(r[3]), median(r[4]))
	}
	b.WriteString(reportHead(fmt.Sprintf("Width: payload size on %s", title), version, began, loadBefore))
	fmt.Fprintf(&b, "- each job's data is a JSON string of random base64 (so compression gains nothing); %d bytes of data per measurement; PushMany and INSERT in batches of about 4 MB; medians of %d rounds, MB = 10^6 bytes of job data\n\n", *payloadTotal, c.rounds)
	b.WriteString(table.String())
	fmt.Println(b.String())
	return nil
}

func sizeText(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%d MB", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%d KB", n/1_000)
	}
	return fmt.Sprintf("%d B", n)
}

// payloadOnce runs -rounds of: dbqueue push, dbqueue burn-down, dbqueue
// end to end, plain INSERT, plain SELECT. It returns MB/s per round for
// push, INSERT, work, SELECT and end to end, in that order.
func payloadOnce(ctx context.Context, c *config, d string, sys *dbqueueq.System, size int) ([5][]float64, error) {
	var res [5][]float64
	if err := sys.Setup(ctx); err != nil {
		return res, err
	}
	db := sys.Admin()
	if err := createPlain(ctx, db, d); err != nil {
		return res, err
	}
	n := *payloadTotal / size
	batch := payloadBatch(size)
	data := randomJSON(size)
	jobs := make([]dbqueue.NewJob, batch)
	for i := range jobs {
		jobs[i] = dbqueue.NewJob{Name: dbqueueq.JobName, Data: data}
	}
	mbps := func(d time.Duration) float64 { return float64(n) * float64(size) / 1e6 / d.Seconds() }
	push := func(ctx context.Context) error {
		for left := n; left > 0; left -= batch {
			if _, err := sys.Queue().PushMany(ctx, jobs[:min(batch, left)]); err != nil {
				return err
			}
		}
		return nil
	}
	for round := range c.rounds {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		err := func() error {
			if err := sys.Reset(rctx); err != nil {
				return err
			}
			t0 := time.Now()
			if err := push(rctx); err != nil {
				return fmt.Errorf("push: %w", err)
			}
			res[0] = append(res[0], mbps(time.Since(t0)))
			t0 = time.Now()
			run, err := sys.StartRun(rctx, n)
			if err != nil {
				return err
			}
			last, err := run.Wait(rctx)
			if err != nil {
				return fmt.Errorf("work: %w", err)
			}
			res[2] = append(res[2], mbps(last.Sub(t0)))
			if err := sys.Reset(rctx); err != nil {
				return err
			}
			t0 = time.Now()
			run, err = sys.StartRun(rctx, n)
			if err != nil {
				return err
			}
			if err := push(rctx); err != nil {
				_ = run.Stop()
				return fmt.Errorf("end to end: push: %w", err)
			}
			if last, err = run.Wait(rctx); err != nil {
				return fmt.Errorf("end to end: %w", err)
			}
			res[4] = append(res[4], mbps(last.Sub(t0)))
			ins, sel, err := plainLoop(rctx, db, d, data, n, batch, sys.Options().Concurrency+sys.Options().Prefetch)
			if err != nil {
				return fmt.Errorf("plain: %w", err)
			}
			res[1], res[3] = append(res[1], mbps(ins)), append(res[3], mbps(sel))
			return nil
		}()
		cancel()
		if err != nil {
			return res, err
		}
		fmt.Fprintf(os.Stderr, "%s %-8s round %d  %s  push %6.1f MB/s  INSERT %6.1f  work %6.1f  SELECT %6.1f  end to end %6.1f  load %s\n",
			time.Now().Format("15:04:05"), d, round+1, sizeText(size), res[0][round], res[1][round], res[2][round], res[3][round], res[4][round], bench.LoadAvg())
	}
	return res, nil
}

// randomJSON is a JSON string of size bytes (quotes included) of random
// base64.
func randomJSON(size int) json.RawMessage {
	raw := make([]byte, size)
	rand.Read(raw)
	s := base64.StdEncoding.EncodeToString(raw)[:max(0, size-2)]
	return json.RawMessage(`"` + s + `"`)
}

func createPlain(ctx context.Context, db *sql.DB, d string) error {
	ddl := map[string]string{
		"pg":      "CREATE TABLE IF NOT EXISTS " + plainTable + " (id bigserial PRIMARY KEY, payload text NOT NULL)",
		"mariadb": "CREATE TABLE IF NOT EXISTS " + plainTable + " (id bigint AUTO_INCREMENT PRIMARY KEY, payload longtext NOT NULL)",
		"sqlite":  "CREATE TABLE IF NOT EXISTS " + plainTable + " (id INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT NOT NULL)",
	}[d]
	_, err := db.ExecContext(ctx, ddl)
	return err
}

// plainLoop empties the plain table, INSERTs n rows of data in multi-row
// statements of batch, then SELECTs them back in id order, page rows at a
// time; it returns how long each took.
func plainLoop(ctx context.Context, db *sql.DB, d string, data json.RawMessage, n, batch, page int) (ins, sel time.Duration, err error) {
	if _, err := db.ExecContext(ctx, "DELETE FROM "+plainTable); err != nil {
		return 0, 0, err
	}
	ph := func(i int) string {
		if d == "pg" {
			return "($" + strconv.Itoa(i+1) + ")"
		}
		return "(?)"
	}
	stmt := func(k int) (string, []any) {
		var b strings.Builder
		b.WriteString("INSERT INTO " + plainTable + " (payload) VALUES ")
		args := make([]any, k)
		for i := range k {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(ph(i))
			args[i] = string(data)
		}
		return b.String(), args
	}
	t0 := time.Now()
	for left := n; left > 0; left -= batch {
		q, args := stmt(min(batch, left))
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return 0, 0, err
		}
	}
	ins = time.Since(t0)
	sel1 := "SELECT id, payload FROM " + plainTable + " WHERE id > ? ORDER BY id LIMIT ?"
	if d == "pg" {
		sel1 = "SELECT id, payload FROM " + plainTable + " WHERE id > $1 ORDER BY id LIMIT $2"
	}
	t0 = time.Now()
	var after int64
	var seen, bytes int
	for {
		rows, err := db.QueryContext(ctx, sel1, after, min(page, 1_000))
		if err != nil {
			return 0, 0, err
		}
		got := 0
		for rows.Next() {
			var p sql.RawBytes
			if err := rows.Scan(&after, &p); err != nil {
				rows.Close()
				return 0, 0, err
			}
			bytes += len(p)
			got++
		}
		if err := rows.Close(); err != nil {
			return 0, 0, err
		}
		seen += got
		if got == 0 {
			break
		}
	}
	sel = time.Since(t0)
	if seen != n || bytes != n*len(data) {
		return 0, 0, fmt.Errorf("read back %d rows, %d bytes; want %d, %d", seen, bytes, n, n*len(data))
	}
	return ins, sel, nil
}
