package dialect

import (
	"strings"
	"testing"
)

// Channels that fit keep the names builds before v0.1.0 gave them, so old and
// new processes hear each other during a rolling deploy; longer ones fit
// PostgreSQL's 63 bytes and stay apart.
func TestNotifyChannelNames(t *testing.T) {
	for _, c := range []struct {
		t    Tables
		want string
	}{
		{DefaultTables, "dbqueue_jobs"},
		{Tables{Jobs: "jobs", Failed: "other_failed"}, "dbqueue_jobs"},
		{Tables{Jobs: "billing_jobs", Failed: "billing_failed"}, "dbqueue_billing_jobs"},
		{Tables{Jobs: "jobs", Failed: "failed_jobs", Schema: "queue"}, "dbqueue_queue_jobs"},
	} {
		if got := notifyChannel(c.t); got != c.want {
			t.Errorf("channel of %+v = %q, want %q", c.t, got, c.want)
		}
	}
	schema := strings.Repeat("s", 63)
	seen := map[string]Tables{}
	for _, tables := range []Tables{
		{Schema: schema, Jobs: strings.Repeat("j", 34)},
		{Schema: schema, Jobs: strings.Repeat("j", 33) + "k"},
		{Schema: schema[:62], Jobs: "s" + strings.Repeat("j", 34)},
		{Schema: schema[:40], Jobs: strings.Repeat("j", 34)},
	} {
		got := notifyChannel(tables)
		if len(got) > maxChannel {
			t.Errorf("channel of %+v is %d bytes, more than PostgreSQL's %d", tables, len(got), maxChannel)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("%+v and %+v share the channel %q", prev, tables, got)
		}
		seen[got] = tables
	}
}
