package dbqueue

import "fmt"

// StatementsText dumps every statement a queue of dialect d would run, for
// explain_test.go to check that the claim SELECTs it EXPLAINs are still the
// ones in use. A dump, not fields, so the check survives a reshuffle of the
// statements struct and fails only when the SQL itself changes.
func StatementsText(d Dialect, mariaDB bool) string {
	return fmt.Sprintf("%+v", newStatements(d, mariaDB))
}
