package hist

import (
	"testing"
	"time"
)

func TestIndexBounds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0}, {0, 0}, {249 * time.Microsecond, 0}, {250 * time.Microsecond, 1},
		{499 * time.Microsecond, 1}, {500 * time.Microsecond, 2}, {time.Millisecond, 3},
		{time.Second, 12}, {time.Hour, Buckets - 1}, {1 << 62, Buckets - 1},
	} {
		i := Index(c.d)
		if i != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.d, i, c.want)
		}
		if c.d >= 0 && i < Buckets-1 && (c.d < Lower(i) || c.d >= Upper(i)) {
			t.Errorf("%v in bucket %d, whose bounds are [%v, %v)", c.d, i, Lower(i), Upper(i))
		}
	}
}

func TestQuantile(t *testing.T) {
	var c [Buckets]int64
	if q := Quantile(&c, 0.5); q != 0 {
		t.Fatalf("empty: %v", q)
	}
	c[Index(3*time.Millisecond)] = 90   // [2ms, 4ms)
	c[Index(300*time.Millisecond)] = 10 // [256ms, 512ms)
	if q := Quantile(&c, 0.5); q < 2*time.Millisecond || q >= 4*time.Millisecond {
		t.Errorf("p50 %v, want in [2ms, 4ms)", q)
	}
	if q := Quantile(&c, 0.95); q < 256*time.Millisecond || q >= 512*time.Millisecond {
		t.Errorf("p95 %v, want in [256ms, 512ms)", q)
	}
	c[Buckets-1] = 1000
	if q := Quantile(&c, 0.95); q != Lower(Buckets-1) {
		t.Errorf("p95 in the open bucket: %v, want its lower bound %v", q, Lower(Buckets-1))
	}
}
