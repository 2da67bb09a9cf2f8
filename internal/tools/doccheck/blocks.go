package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The packages a fragment may name without importing them, by the name
// it uses.
var known = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "log": "log", "slog": "log/slog",
	"time": "time", "os": "os", "sql": "database/sql", "http": "net/http", "testing": "testing",
	"strings": "strings", "json": "encoding/json",
	"dbqueue":     "github.com/dbqueue/dbqueue",
	"worker":      "github.com/dbqueue/dbqueue/worker",
	"failed":      "github.com/dbqueue/dbqueue/failed",
	"migrations":  "github.com/dbqueue/dbqueue/migrations",
	"periodic":    "github.com/dbqueue/dbqueue/periodic",
	"middleware":  "github.com/dbqueue/dbqueue/middleware",
	"dbqueuetest": "github.com/dbqueue/dbqueue/dbqueuetest",
	"dashboard":   "github.com/dbqueue/dbqueue/dashboard",
	"dbqotel":     "github.com/dbqueue/dbqueue/dbqotel",
	"dbqpgx":      "github.com/dbqueue/dbqueue/driver/dbqpgx",
	"dbqmysql":    "github.com/dbqueue/dbqueue/driver/dbqmysql",
	"dbqsqlite":   "github.com/dbqueue/dbqueue/driver/dbqsqlite",
	"goose":       "github.com/pressly/goose/v3",
	"metric":      "go.opentelemetry.io/otel/metric",
	"trace":       "go.opentelemetry.io/otel/trace",
	"pgxpool":     "github.com/jackc/pgx/v5/pgxpool",
}

// givens are the variables every fragment may use undeclared.
const givens = `var (
	ctx context.Context
	q   *dbqueue.Queue
	db  *sql.DB
	w   *worker.Worker
	dsn string
	id  int64
)
`

var (
	importLine  = regexp.MustCompile(`^import\s+(?:[\w.]+\s+)?"[^"]+"\s*(//.*)?$`)
	importPath  = regexp.MustCompile(`"([^"]+)"`)
	compileLine = regexp.MustCompile(`^(.+\.go):(\d+):(\d+): (.*)$`)
	// Fragments show a few lines of a larger program: what they declare
	// may go unused there.
	unusedInFragment = regexp.MustCompile(`^(declared and not used: |"[^"]+" imported and not used|"[^"]+" imported as \w+ and not used)`)
)

// source is one generated Go file: the block it comes from, and the line
// of the file where the block's first line lands.
type source struct {
	doc      *doc
	block    block
	offset   int // generated line g holds the block's line g - offset (0-based)
	fragment bool
}

// checkBlocks checks every ```go block of docs by its rule (see
// CONTRIBUTING.md, "Go code in the docs"): mirrors are compared with the
// function they mirror; whole files and fragments are built, all in one
// go build, as packages of the module at root laid over it.
func checkBlocks(root string, docs []*doc) ([]string, error) {
	tmp, err := os.MkdirTemp("", "doccheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var (
		errs    []string
		overlay = map[string]string{}
		sources = map[string]source{}
		pkgs    []string
	)
	n := 0
	for _, d := range docs {
		for _, b := range d.blocks {
			if b.lang != "go" {
				continue
			}
			directive, arg, _ := strings.Cut(b.marker, " ")
			switch directive {
			case "skip":
				if strings.TrimSpace(arg) == "" {
					errs = append(errs, fmt.Sprintf("%s:%d: doccheck: skip needs a reason", d.path, b.line))
				}
				continue
			case "mirrors":
				errs = append(errs, checkMirror(d, b, arg)...)
				arg = "" // and it builds as a fragment
			case "", "given":
			default:
				errs = append(errs, fmt.Sprintf("%s:%d: unknown doccheck directive %q: use given, mirrors or skip", d.path, b.line, directive))
				continue
			}
			n++
			text, offset, fragment := wrap(b, arg)
			file := filepath.Join(tmp, fmt.Sprintf("block%d.go", n))
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				return nil, err
			}
			pkg := fmt.Sprintf("./internal/tools/doccheck/blocks/b%d", n)
			overlay[filepath.Join(root, pkg, "block.go")] = file
			sources[file] = source{d, b, offset, fragment}
			pkgs = append(pkgs, pkg)
		}
	}
	if len(pkgs) == 0 {
		return errs, nil
	}
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("go", append([]string{"build", "-gcflags=-e", "-overlay", ovFile, "-o", os.DevNull}, pkgs...)...)
	if len(pkgs) > 1 {
		cmd.Args = append([]string{"go", "build", "-gcflags=-e", "-overlay", ovFile}, pkgs...)
	}
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil {
		return errs, nil
	}
	parsed := false
	for _, line := range strings.Split(string(out), "\n") {
		m := compileLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		// go prints a file by the shorter of its absolute path and its
		// path relative to the build's directory: a clone in /tmp/x
		// names /tmp/doccheck… as ../doccheck….
		name := m[1]
		if !filepath.IsAbs(name) {
			name = filepath.Join(root, name)
		}
		src, ok := sources[filepath.Clean(name)]
		if !ok {
			continue
		}
		parsed = true
		if src.fragment && unusedInFragment.MatchString(m[4]) {
			continue
		}
		ln, _ := strconv.Atoi(m[2])
		at := src.block.line // in the wrapping around the block
		if k := ln - src.offset; k >= 0 && k <= strings.Count(src.block.code, "\n") {
			at = src.block.line + 1 + k
		}
		errs = append(errs, fmt.Sprintf("%s:%d: go block at line %d: %s", src.doc.path, at, src.block.line, m[4]))
	}
	if !parsed {
		return nil, fmt.Errorf("go build of the blocks failed: %v\n%s", err, bytes.TrimSpace(out))
	}
	return errs, nil
}

// wrap returns the Go file a block is built as, the line of that file
// where the block's first line is, and whether it is a fragment.
func wrap(b block, given string) (text string, offset int, fragment bool) {
	lines := strings.Split(b.code, "\n")
	first := ""
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "//") {
			first = t
			break
		}
	}
	if strings.HasPrefix(first, "package ") {
		return b.code, 1, false // line g is the block's g - 1
	}
	// Import lines at the top of a fragment go to the file's imports.
	imports := map[string]string{} // path → line
	body := 0
	for body < len(lines) {
		t := strings.TrimSpace(lines[body])
		switch {
		case t == "" || strings.HasPrefix(t, "//"):
		case importLine.MatchString(t):
			imports[importPath.FindStringSubmatch(t)[1]] = strings.TrimPrefix(t, "import ")
		case t == "import (":
			for body++; body < len(lines) && strings.TrimSpace(lines[body]) != ")"; body++ {
				if m := importPath.FindStringSubmatch(lines[body]); m != nil {
					imports[m[1]] = strings.TrimSpace(lines[body])
				}
			}
		default:
			goto done
		}
		body++
	}
done:
	rest := strings.Join(lines[min(body, len(lines)):], "\n")
	for _, name := range []string{"context", "dbqueue", "sql", "worker"} {
		imports[known[name]] = strconv.Quote(known[name])
	}
	for name, path := range known {
		if _, ok := imports[path]; !ok && regexp.MustCompile(`\b`+name+`\.`).MatchString(rest+given) {
			imports[path] = strconv.Quote(path)
		}
	}
	paths := make([]string, 0, len(imports))
	for p := range imports {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var f strings.Builder
	f.WriteString("package doc\n\nimport (\n")
	for _, p := range paths {
		f.WriteString("\t" + imports[p] + "\n")
	}
	f.WriteString(")\n\n" + givens)
	if given != "" {
		f.WriteString(given + "\n")
	}
	decls := strings.HasPrefix(strings.TrimSpace(rest), "func ") || strings.TrimSpace(rest) == ""
	if !decls {
		f.WriteString("func _() error {\n")
	}
	// Generated line g holds the block's line g - offset (0-based).
	offset = strings.Count(f.String(), "\n") + 1 - body
	f.WriteString(rest)
	if !decls {
		f.WriteString("\nreturn nil\n}\n")
	}
	return f.String(), offset, true
}

// checkMirror checks a block that shows an Example kept elsewhere, often
// shortened: arg is "FILE FUNC" (FILE relative to the doc). FUNC must be
// in FILE, and the block's "// Output:" lines, which go test checks in
// FUNC, must be FUNC's.
func checkMirror(d *doc, b block, arg string) []string {
	file, fn, ok := strings.Cut(strings.TrimSpace(arg), " ")
	if !ok || fn == "" {
		return []string{fmt.Sprintf("%s:%d: doccheck: mirrors needs a file and a function: mirrors example_test.go ExampleQueue", d.path, b.line)}
	}
	src, err := os.ReadFile(filepath.Join(filepath.Dir(d.path), file))
	if err != nil {
		return []string{fmt.Sprintf("%s:%d: mirrored file: %v", d.path, b.line, err)}
	}
	text := string(src)
	start := strings.Index(text, "\nfunc "+fn+"(")
	if start < 0 {
		return []string{fmt.Sprintf("%s:%d: %s has no func %s", d.path, b.line, file, fn)}
	}
	end := strings.Index(text[start:], "\n}\n")
	if end < 0 {
		end = len(text) - start
	}
	want, got := output(text[start:start+end]), output(b.code)
	if want != got {
		return []string{fmt.Sprintf("%s:%d: the block's output comment differs from %s's in %s:\n%s\nwant:\n%s", d.path, b.line, fn, file, got, want)}
	}
	return nil
}

// output is the "// Output:" comment of an Example's body, its lines
// trimmed ("" when it has none).
func output(body string) string {
	_, out, ok := strings.Cut(body, "// Output:")
	if !ok {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "//") {
			continue
		}
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(t, "//")))
	}
	return strings.Join(lines, "\n")
}
