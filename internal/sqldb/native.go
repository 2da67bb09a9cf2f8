package sqldb

import (
	"context"
	"database/sql"
	"reflect"
)

// NativeBeginner is a DB that begins transactions as its client's own type
// — a *sql.Tx on database/sql, a pgx.Tx on a pgx pool — so that a handler
// can write in the transaction that also ends its job, with the API its
// application already uses.
type NativeBeginner interface {
	// BeginNative begins a transaction and returns it twice: as the
	// client's own value and adapted to Tx.
	BeginNative(ctx context.Context) (native any, tx Tx, err error)
	// NativeTx is the type of BeginNative's native value.
	NativeTx() reflect.Type
}

func (s *stdDB) BeginNative(ctx context.Context) (any, Tx, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	return tx, SQLTx(tx), nil
}

func (s *stdDB) NativeTx() reflect.Type { return reflect.TypeFor[*sql.Tx]() }

var _ NativeBeginner = (*stdDB)(nil)
