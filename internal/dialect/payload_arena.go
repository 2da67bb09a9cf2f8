package dialect

import "fmt"

// arenaBlock is how many bytes of payloads one allocation holds. A claim
// of 1,000 jobs used to allocate 1,000 payload slices, and the garbage
// collector's work grows with the objects it sweeps and marks; a block
// holds about a hundred ordinary payloads. A job kept past its handler
// keeps its block, this much, alive.
const arenaBlock = 32 << 10

// payloadArena is the scan target of a claim's payload column: it copies
// each row's payload into a shared block and keeps the last one in last.
// It satisfies both database/sql's Scanner and pgx's BytesScanner, which
// hands it the driver's buffer rather than a fresh slice.
type payloadArena struct {
	block []byte
	last  []byte
}

// put copies v into the current block, or a new one when it does not
// fit; a payload over a quarter of a block gets a slice of its own, so
// one large job never strands most of a block.
func put[T string | []byte](a *payloadArena, v T) {
	if len(v) > arenaBlock/4 {
		a.last = append([]byte(nil), v...)
		a.last = a.last[:len(v):len(v)]
		return
	}
	if cap(a.block)-len(a.block) < len(v) {
		a.block = make([]byte, 0, arenaBlock)
	}
	start := len(a.block)
	a.block = append(a.block, v...)
	// Capacity cut at the end: appending to one job's RawPayload copies it
	// rather than writing over the next job's.
	a.last = a.block[start:len(a.block):len(a.block)]
}

// ScanBytes is pgx's BytesScanner: v is the driver's memory, copied.
func (a *payloadArena) ScanBytes(v []byte) error {
	if v == nil {
		a.last = nil // NULL
		return nil
	}
	put(a, v)
	return nil
}

// Scan is database/sql's Scanner: go-sql-driver returns the text column
// as []byte, modernc's SQLite as a string.
func (a *payloadArena) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		a.last = nil
	case []byte:
		put(a, v)
	case string:
		put(a, v)
	default:
		return fmt.Errorf("dbqueue: payload column holds a %T, want text", src)
	}
	return nil
}
