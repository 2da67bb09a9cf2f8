package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbqueue"
	"github.com/dbqueue/dbqueue/failed"
)

// The actions a form may post, in its "op" field.
const (
	opPause    = "pause"     // queue
	opResume   = "resume"    // queue
	opRetry    = "retry"     // uuid
	opForget   = "forget"    // uuid
	opRetryAll = "retry-all" // queue, or every queue when empty
	opFlush    = "flush"     // every failed job
	opCancel   = "cancel"    // id
	opRunNow   = "run-now"   // id
)

// errReadOnly refuses actions on a ReadOnly dashboard.
var errReadOnly = errors.New("this dashboard is read-only: actions are turned off (Options.ReadOnly)")

// httpError is an error with the status it is answered with.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// action runs a posted form and redirects (303) back to the page it came
// from, leaving that page a line saying what was done (setFlash).
func (d *Dashboard) action(w http.ResponseWriter, r *http.Request) {
	if d.opts.ReadOnly {
		d.fail(w, r, http.StatusForbidden, errReadOnly)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("read the form: %w", err))
		return
	}
	if err := d.checkAction(r); err != nil {
		d.fail(w, r, http.StatusForbidden, err)
		return
	}
	op := r.PostFormValue("op")
	done, err := d.run(r.Context(), op, r.PostForm)
	if err != nil {
		status := http.StatusInternalServerError
		var he *httpError
		switch {
		case errors.As(err, &he):
			status = he.status
		case errors.Is(err, failed.ErrNotFound), errors.Is(err, dbqueue.ErrJobNotFound):
			status = http.StatusNotFound
		case errors.Is(err, failed.ErrOtherConnection), errors.Is(err, dbqueue.ErrJobReserved):
			status = http.StatusConflict
		}
		d.fail(w, r, status, fmt.Errorf("%s: %w", op, err))
		return
	}
	d.stats.invalidate()
	d.setFlash(w, r, done, time.Now())
	w.Header().Set("Location", backTo(r.PostFormValue("back")))
	w.WriteHeader(http.StatusSeeOther)
}

// run performs one action and says what it did.
func (d *Dashboard) run(ctx context.Context, op string, form url.Values) (string, error) {
	switch op {
	case opPause, opResume:
		queue, err := field(form, "queue")
		if err != nil {
			return "", err
		}
		if op == opPause {
			return fmt.Sprintf("Paused queue %q: workers take no more jobs from it until it is resumed.", queue), d.q.Pause(ctx, queue)
		}
		return fmt.Sprintf("Resumed queue %q.", queue), d.q.Resume(ctx, queue)
	case opRetry:
		uuid, err := field(form, "uuid")
		if err != nil {
			return "", err
		}
		if _, err := d.failed.Retry(ctx, uuid); err != nil {
			return "", err
		}
		return fmt.Sprintf("Retried failed job %s: it is back on its queue.", uuid), nil
	case opForget:
		uuid, err := field(form, "uuid")
		if err != nil {
			return "", err
		}
		found, err := d.failed.Forget(ctx, uuid)
		if err != nil {
			return "", err
		}
		if !found {
			return "", fmt.Errorf("%w: %q", failed.ErrNotFound, uuid)
		}
		return fmt.Sprintf("Deleted failed job %s.", uuid), nil
	case opRetryAll:
		queue := strings.TrimSpace(form.Get("queue"))
		var n int
		var err error
		if queue == "" {
			n, err = d.failed.RetryAll(ctx)
		} else {
			n, err = d.failed.RetryQueue(ctx, queue)
		}
		if err != nil {
			return "", fmt.Errorf("after %d retried: %w", n, err)
		}
		if queue == "" {
			return fmt.Sprintf("Retried %d failed jobs.", n), nil
		}
		return fmt.Sprintf("Retried %d failed jobs of queue %q.", n, queue), nil
	case opFlush:
		n, err := d.failed.Flush(ctx, 0)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Deleted all %d failed jobs.", n), nil
	case opCancel, opRunNow:
		id, err := jobID(form.Get("id"))
		if err != nil {
			return "", err
		}
		if op == opCancel {
			return fmt.Sprintf("Cancelled job %d: it will not run.", id), d.q.Cancel(ctx, id)
		}
		return fmt.Sprintf("Job %d is due now.", id), d.q.RunNow(ctx, id)
	case "":
		return "", badRequest("the form names no action (field op)")
	}
	return "", badRequest("unknown action %q: use one of pause, resume, retry, forget, retry-all, flush, cancel, run-now", op)
}

// field is a required form field.
func field(form url.Values, name string) (string, error) {
	v := strings.TrimSpace(form.Get(name))
	switch {
	case v == "":
		return "", badRequest("the form has no %s", name)
	case len(v) > 255:
		return "", badRequest("the form's %s is %d bytes long: at most 255", name, len(v))
	}
	return v, nil
}

// jobID parses a job id of a form or a query.
func jobID(s string) (int64, error) {
	if s == "" {
		return 0, badRequest("no job id given")
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("job id %q: want a positive whole number", s)
	}
	return id, nil
}

// backPage is a page of this dashboard, relative, with its query: where an
// action may send the browser back to. Anything else (an absolute URL, a
// path of another site) goes to the queues page, so the field cannot make
// the dashboard an open redirect.
var backPage = regexp.MustCompile(`^(\./|jobs|job|failed|failed-job)?(\?[^#\\]*)?$`)

// backTo is the relative URL to redirect to after an action. It drops a
// flash parameter that links of builds before v0.1.0 carried.
func backTo(back string) string {
	if !backPage.MatchString(back) {
		back = "./"
	}
	page, query, _ := strings.Cut(back, "?")
	if page == "" {
		page = "./"
	}
	vals, _ := url.ParseQuery(query)
	vals.Del("flash")
	if len(vals) == 0 {
		return page
	}
	return page + "?" + vals.Encode()
}
