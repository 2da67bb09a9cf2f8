package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlugIsGitHubs(t *testing.T) {
	for h, want := range map[string]string{
		"Adding a database":                       "adding-a-database",
		"Transactional handlers: exactly-once":    "transactional-handlers-exactly-once",
		"`dbqueue.Open` and [DSNs](docs/x.md)":    "dbqueueopen-and-dsns",
		"Queue names up to 255 bytes, any bytes!": "queue-names-up-to-255-bytes-any-bytes",
		"Für Über_Namen — 2 ways":                 "für-über_namen--2-ways",
		"PostgreSQL 1.04/1.05, MariaDB (0.90)":    "postgresql-104105-mariadb-090",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// write makes files under a temporary directory and returns it.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Every broken relative link and anchor is reported with its line; links
// in code, to other sites, and to headings that exist (the second of two
// equal headings included) are not.
func TestLinks(t *testing.T) {
	dir := write(t, map[string]string{
		"README.md": strings.Join([]string{
			"# Top",
			"## Twice",
			"## Twice",
			"See [a](docs/a.md#part-one), [b](docs/a.md#nope), [c](#twice-1), [d](#top-2).",
			"[missing](docs/none.md) and `[code](nowhere.md)` and [web](https://example.com/x.md#y)",
			"```sh",
			"[in a block](nowhere.md)",
			"```",
			"[ref]: docs/gone.md",
			`<a href="docs/a.md#part-two">html</a>`,
		}, "\n"),
		"docs/a.md": "# Part one\n<a name=\"custom\"></a>\n[back](../README.md#twice) [anchor](#custom)\n",
	})
	readme := filepath.Join(dir, "README.md")
	errs, err := check(dir, []string{readme, filepath.Join(dir, "docs/a.md")})
	if err != nil {
		t.Fatal(err)
	}
	expectFaults(t, errs,
		"README.md:4: link to docs/a.md#nope",
		"README.md:4: link to #top-2",
		"README.md:5: link to docs/none.md: no such file",
		"README.md:9: link to docs/gone.md: no such file",
		"README.md:10: link to docs/a.md#part-two",
	)
}

// expectFaults fails t unless errs are one fault for each of want, each
// holding its text.
func expectFaults(t *testing.T, errs []string, want ...string) {
	t.Helper()
	got := strings.Join(errs, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d faults, want %d:\n%s", len(errs), len(want), got)
	}
}

// Go blocks are built against this module: a fragment that calls what
// does not exist fails at its own line, unused names in a fragment do
// not, a mirror's output must be its Example's, and a skip needs a reason.
func TestGoBlocks(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := write(t, map[string]string{
		"ex_test.go": "package x\n\nfunc ExampleX() {\n\t// Output:\n\t// one\n\t// two\n}\n",
		"doc.md": strings.Join([]string{
			"```go",                              // 1
			"n, err := q.Size(ctx, \"default\")", // 2: unused here, fine
			"err = q.NoSuchMethod(ctx)",          // 3
			"```",                                // 4
			"<!-- doccheck: given var cause error -->",
			"```go", // 6
			"err := q.Fail(ctx, nil, cause)",
			"```",
			"<!-- doccheck: mirrors ex_test.go ExampleX -->",
			"```go", // 10
			"func ExampleX() {",
			"\t// Output:",
			"\t// one",
			"\t// three",
			"}",
			"```",
			"<!-- doccheck: skip -->",
			"```go", // 18
			"not go",
			"```",
			"```go", // 21
			"package main",
			"",
			"func main() { undefinedCall() }",
			"```",
		}, "\n"),
	})
	errs, err := check(root, []string{filepath.Join(dir, "doc.md")})
	if err != nil {
		t.Fatal(err)
	}
	expectFaults(t, errs,
		"doc.md:3: go block at line 1: q.NoSuchMethod undefined",
		"doc.md:10: the block's output comment differs from ExampleX's",
		"doc.md:18: doccheck: skip needs a reason",
		"doc.md:24: go block at line 21: undefined: undefinedCall",
	)
}

// A guide's table of contents must link every section; a section in code
// is no section, and the README keeps its own shape.
func TestContents(t *testing.T) {
	dir := write(t, map[string]string{
		"README.md": "# Top\n\n## Not listed, not a guide\n",
		"docs/g.md": strings.Join([]string{
			"# Guide",
			"",
			"- [One](#one)",
			"- [Twice](#twice-2)",
			"",
			"## One",
			"```sh",
			"## a shell comment, not a section",
			"```",
			"## Twice",
			"### Twice",
			"## Twice",
			"## Missing",
			"See [One](#one) again.",
		}, "\n"),
	})
	errs, err := check(dir, []string{filepath.Join(dir, "README.md"), filepath.Join(dir, "docs", "g.md")})
	if err != nil {
		t.Fatal(err)
	}
	expectFaults(t, errs,
		"g.md:10: section #twice is missing from the table of contents",
		"g.md:13: section #missing is missing from the table of contents")
}

// A table of measured numbers must be followed by its caption; other
// tables, and tables in code, need none.
func TestCaptions(t *testing.T) {
	dir := write(t, map[string]string{
		"README.md": strings.Join([]string{
			"# Top",
			"| system | jobs/s |",
			"|---|---:|",
			"| dbqueue | 100 |",
			"",
			"> `cd bench && go run ./cmd/compare` · 2026-11-27 03:00 UTC · 2 CPUs · load average 1 → 2 · took 1m",
			"",
			"| latency | p50 |",
			"|---|---:|",
			"| pg | 1 ms |",
			"",
			"Measured somewhere.",
			"",
			"| name | meaning |",
			"|---|---|",
			"| Queue | where |",
			"```",
			"| in code | jobs/s |",
			"|---|---|",
			"```",
			"- a list item:",
			"",
			"  | size | MB |",
			"  |---|---:|",
			"  | a | 1 |",
			"",
			"  > `go build` · 2026-11-27",
		}, "\n"),
	})
	errs, err := check(dir, []string{filepath.Join(dir, "README.md")})
	if err != nil {
		t.Fatal(err)
	}
	expectFaults(t, errs, "README.md:8: a table of measured numbers needs its caption right under it")
}

// go names a file by its path relative to the build's directory when that
// is shorter, as it is for a clone beside the temporary directory (CI's
// /tmp/x against /tmp/doccheck…): the fragment's unused names must still
// be recognised as the block's.
func TestGoBlocksWithATempDirNearTheModule(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	near, err := os.MkdirTemp(".", ".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(near) })
	abs, err := filepath.Abs(near)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", abs)
	dir := write(t, map[string]string{
		"doc.md": "```go\nn, err := q.Size(ctx, \"default\")\n```\n",
	})
	errs, err := check(root, []string{filepath.Join(dir, "doc.md")})
	if err != nil {
		t.Fatal(err)
	}
	expectFaults(t, errs)
}
