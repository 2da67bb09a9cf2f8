package worker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
)

// BenchmarkRecordJob is the in-memory cost a job adds when metrics are on
// (Options.MetricsInterval): its queue wait at start and its outcome and
// runtime at the end, from every goroutine at once, jobs of one queue
// and kind (the most contended case).
func BenchmarkRecordJob(b *testing.B) {
	rc := newRecorder(false)
	jobs := make([]dbqueue.Job, 64)
	for i := range jobs {
		jobs[i] = dbqueue.Job{ID: int64(i), Queue: "default", AvailableAt: time.Unix(1000, 0), Payload: dbqueue.Payload{Job: "App\\Jobs\\SendMail"}}
	}
	now := time.Unix(1001, 0)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) * 7
		for pb.Next() {
			job := &jobs[i%int64(len(jobs))]
			i++
			rc.started(job, now)
			rc.finish(job, countProcessed, 3*time.Millisecond, true)
		}
	})
}

// BenchmarkRecordJobManyKinds records jobs of 50 kinds on 5 queues from
// one goroutine.
func BenchmarkRecordJobManyKinds(b *testing.B) {
	rc := newRecorder(false)
	var jobs []*dbqueue.Job
	for i := range 250 {
		jobs = append(jobs, &dbqueue.Job{ID: int64(i), Queue: string(rune('a' + i%5)), Payload: dbqueue.Payload{Job: "App\\Jobs\\Kind" + string(rune('A'+i%50))}})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		job := jobs[i%len(jobs)]
		i++
		rc.started(job, job.AvailableAt)
		rc.finish(job, countProcessed, time.Millisecond, true)
	}
}
