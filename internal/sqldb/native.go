package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
)

// NativeBeginner is a DB that begins transactions as its client's own type
// — a *sql.Tx on database/sql, a pgx.Tx on a pgx pool — so that a handler
// can write in the transaction that also ends its job, with the API its
// application already uses.
type NativeBeginner interface {
	// BeginNative begins a transaction and returns it twice: as a value
	// of type as (one of NativeTx) and adapted to Tx.
	BeginNative(ctx context.Context, as reflect.Type) (native any, tx Tx, err error)
	// NativeTx are the types BeginNative can begin, the client's own
	// first.
	NativeTx() []reflect.Type
}

// SQLTxType is the type of a database/sql transaction.
var SQLTxType = reflect.TypeFor[*sql.Tx]()

func (s *stdDB) BeginNative(ctx context.Context, as reflect.Type) (any, Tx, error) {
	if as != SQLTxType {
		return nil, nil, fmt.Errorf("a database/sql pool begins a *sql.Tx, not a %v", as)
	}
	return BeginSQL(ctx, s.db)
}

// BeginSQL begins a transaction on db for a handler: as itself and
// adapted to Tx.
func BeginSQL(ctx context.Context, db *sql.DB) (*sql.Tx, Tx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	return tx, SQLTx(tx), nil
}

func (s *stdDB) NativeTx() []reflect.Type { return []reflect.Type{SQLTxType} }

var _ NativeBeginner = (*stdDB)(nil)
