package migrations

// UniqueTable is the table of unique-job and periodic-tick locks of this
// table set: dbqueue_unique for the default set, <jobs>_unique otherwise,
// schema-qualified when Schema is set, so two table sets never share (or
// drop) each other's locks.
func (t Tables) UniqueTable() string {
	if t.isDefault() {
		return t.qualify("dbqueue_unique")
	}
	return t.qualify(t.withDefaults().Jobs + "_unique")
}
