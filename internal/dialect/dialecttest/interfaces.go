package dialecttest

import (
	"reflect"

	"github.com/dbqueue/dbqueue/internal/dialect"
)

// iface is one interface of package dialect and the suite's tests of it.
type iface struct {
	typ   reflect.Type
	tests []test
}

// interfaces are the interfaces a database's dialect implements, each
// with the tests of its file here. A new interface of package dialect
// goes in this list, with a file of tests of its own:
// TestEveryInterfaceIsListed fails on an exported interface of package
// dialect that is not here, and TestEveryMethodHasATest on a method of
// one that has no test.
var interfaces = []iface{
	{reflect.TypeFor[dialect.Dialect](), dialectTests},
	{reflect.TypeFor[dialect.Batches](), batchesTests},
	{reflect.TypeFor[dialect.Bounded](), boundedTests},
	{reflect.TypeFor[dialect.ErrorHistory](), historyTests},
	{reflect.TypeFor[dialect.FlowControl](), flowControlTests},
	{reflect.TypeFor[dialect.Limits](), limitsTests},
	{reflect.TypeFor[dialect.Lookup](), lookupTests},
	{reflect.TypeFor[dialect.Operator](), operatorTests},
	{reflect.TypeFor[dialect.ScheduleBook](), scheduleBookTests},
	{reflect.TypeFor[dialect.Searcher](), searcherTests},
	{reflect.TypeFor[dialect.TickLocker](), tickLockerTests},
	{reflect.TypeFor[dialect.TxFinisher](), txFinisherTests},
	{reflect.TypeFor[dialect.Uniquer](), uniquerTests},
}

// method is one method of an interface and its tests, named
// "Interface.Method".
type method struct {
	name  string
	tests []test
}

// methods lists in's methods in the order of the interface's tests, then
// those that have none (with no tests: TestEveryMethodHasATest names
// them, and Run runs nothing for them).
func (in iface) methods() []method {
	var out []method
	at := map[string]int{}
	for _, c := range in.tests {
		i, ok := at[c.method]
		if !ok {
			i = len(out)
			at[c.method] = i
			out = append(out, method{name: in.typ.Name() + "." + c.method})
		}
		out[i].tests = append(out[i].tests, c)
	}
	return out
}

// missing names the methods of in that have no test, and the tests that
// name no method of in.
func (in iface) missing() (untested, unknown []string) {
	has := map[string]bool{}
	for _, c := range in.tests {
		has[c.method] = true
	}
	embedded := map[string]bool{} // methods of the listed interfaces in.typ embeds: tested in their files
	for _, other := range interfaces {
		if other.typ != in.typ && in.typ.Implements(other.typ) {
			for i := range other.typ.NumMethod() {
				embedded[other.typ.Method(i).Name] = true
			}
		}
	}
	for i := range in.typ.NumMethod() {
		name := in.typ.Method(i).Name
		if embedded[name] {
			continue
		}
		if !has[name] {
			untested = append(untested, in.typ.Name()+"."+name)
		}
		delete(has, name)
	}
	for name := range has {
		unknown = append(unknown, in.typ.Name()+"."+name)
	}
	return untested, unknown
}
