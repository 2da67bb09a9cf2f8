package dbqotel

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dbqueue/dbqueue"
)

// AttrPushCount, on a push span, is how many jobs the push wrote.
const AttrPushCount = attribute.Key("dbqueue.push.count")

// PushMiddleware is the push side: give it to the queue with
// dbqueue.WithPushMiddleware, first, so the trace context it writes is in
// the jobs every later middleware sees and its span covers them. Each push
// (Push, PushMany, PushTx alike) gets one producer span, whose context goes
// into every job's payload headers, and adds its jobs to
// dbqueue.jobs.pushed once the write succeeded.
func (i *Instrumentation) PushMiddleware() dbqueue.PushMiddleware {
	return func(ctx context.Context, jobs []dbqueue.NewJob, next dbqueue.PushFunc) ([]int64, error) {
		var span trace.Span
		if i.tracing {
			ctx, span = i.tracer.Start(ctx, pushSpanName(jobs),
				trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(MessagingSystem, AttrPushCount.Int(len(jobs))))
			if q, ok := oneQueue(jobs, i.opts.DefaultQueue); ok {
				span.SetAttributes(AttrQueue.String(q))
			}
			carrier := propagation.MapCarrier{}
			i.prop.Inject(ctx, carrier)
			if len(carrier) > 0 {
				for j := range jobs {
					if len(jobs[j].Headers) == 0 {
						// One map shared by the jobs with no headers of
						// their own: headers are set with SetHeader,
						// which copies, so no job's change reaches another.
						jobs[j].Headers = carrier
						continue
					}
					// A fresh map, as NewJob.SetHeader makes: the caller's
					// map is often shared and never written.
					h := make(map[string]string, len(jobs[j].Headers)+len(carrier))
					maps.Copy(h, jobs[j].Headers)
					maps.Copy(h, carrier)
					jobs[j].Headers = h
				}
			}
		}
		ids, err := next(ctx, jobs)
		if span != nil {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
		if err == nil {
			i.countPushed(ctx, jobs)
		}
		return ids, err
	}
}

// MessagingSystem is on every span, so a trace view can tell dbqueue's
// spans from another queue's.
var MessagingSystem = attribute.String("messaging.system", "dbqueue")

// countPushed adds jobs to the pushed counter, one Add per run of jobs of
// one kind: a PushMany of 10,000 jobs of one name is one call. NewJob.Name
// is what Job.Name returns for a job pushed from Go, so both sides count
// under the same name.
func (i *Instrumentation) countPushed(ctx context.Context, jobs []dbqueue.NewJob) {
	var run jobKey
	var n int64
	for _, j := range jobs {
		k := jobKey{j.Queue, j.Name}
		if k.queue == "" {
			k.queue = i.opts.DefaultQueue
		}
		if k != run && n > 0 {
			i.pushed.Add(ctx, n, i.attrs.get(run.queue, run.name).add...)
			n = 0
		}
		run = k
		n++
	}
	if n > 0 {
		i.pushed.Add(ctx, n, i.attrs.get(run.queue, run.name).add...)
	}
}

// pushSpanName is "push NAME" when all jobs share a name, else "push".
func pushSpanName(jobs []dbqueue.NewJob) string {
	if len(jobs) == 0 {
		return "push"
	}
	for _, j := range jobs[1:] {
		if j.Name != jobs[0].Name {
			return "push"
		}
	}
	return "push " + jobs[0].Name
}

// oneQueue is the queue all jobs go to, if they share one.
func oneQueue(jobs []dbqueue.NewJob, def string) (string, bool) {
	q := def
	for n, j := range jobs {
		jq := j.Queue
		if jq == "" {
			jq = def
		}
		if n > 0 && jq != q {
			return "", false
		}
		q = jq
	}
	return q, len(jobs) > 0
}
