package handover

import "github.com/gpuadmit/gpuadmit/pkg/poolowner"

// The record's types live in package poolowner, which gpuadmit-scheduler's
// module reads too; these names keep the state machine's code short.
type (
	// Owners is poolowner.Owners.
	Owners = poolowner.Owners
	// State is poolowner.State.
	State = poolowner.State
)

const (
	// SchedulerName is gpuadmit-scheduler's name.
	SchedulerName = poolowner.SchedulerName
	// ConfigMapName is the record's ConfigMap.
	ConfigMapName = poolowner.ConfigMapName
	// Owned, Stock and Releasing are poolowner's states.
	Owned     = poolowner.Owned
	Stock     = poolowner.Stock
	Releasing = poolowner.Releasing
)

// Parse is poolowner.Parse.
func Parse(data map[string]string) (Owners, error) { return poolowner.Parse(data) }
