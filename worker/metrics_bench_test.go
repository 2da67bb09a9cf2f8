package worker

import (
	"testing"
	"time"

	"github.com/dbqueue/dbqueue"
)

// BenchmarkRecordJob is the in-memory cost a job adds when metrics are on
// (Options.MetricsInterval): its queue wait at start and its outcome and
// runtime at the end.
func BenchmarkRecordJob(b *testing.B) {
	rc := newRecorder(false)
	job := &dbqueue.Job{Queue: "default", AvailableAt: time.Unix(1000, 0), Payload: dbqueue.Payload{Job: "App\\Jobs\\SendMail"}}
	now := time.Unix(1001, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rc.started(job, now)
			rc.finish(job, countProcessed, 3*time.Millisecond, true)
		}
	})
}

// BenchmarkRecordJobManyKinds records jobs of 50 kinds on 5 queues.
func BenchmarkRecordJobManyKinds(b *testing.B) {
	rc := newRecorder(false)
	var jobs []*dbqueue.Job
	for i := range 250 {
		jobs = append(jobs, &dbqueue.Job{Queue: string(rune('a' + i%5)), Payload: dbqueue.Payload{Job: "App\\Jobs\\Kind" + string(rune('A'+i%50))}})
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
