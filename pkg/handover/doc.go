// Package handover keeps gpuadmit-scheduler's ownership of GPU pools safe
// across its comings and goings.
//
// spec.schedulerName is immutable (for gated pods too), so a pod admitted to
// gpuadmit-scheduler waits for it for good once it is gone, and a pool whose
// owner changes while pods wait for the old owner would have two schedulers
// placing on the same GPUs. The package holds the three pieces that prevent
// both:
//
//   - Lease judges gpuadmit-scheduler's Lease as client-go's leader election
//     judges it: by the local time at which the record was last seen to
//     change, never by the renewTime the scheduler's clock wrote.
//   - Owners is the record, one per cluster (the ConfigMap
//     gpuadmit-system/gpuadmit-scheduler-pools), of which pools
//     gpuadmit-scheduler may own now. The leader-elected controller is its
//     only writer; the webhook reads it (input.cluster.owners) and gives
//     gpuadmit-scheduler only the pools it records; gpuadmit-scheduler's
//     plugin refuses pods of pools it does not record.
//   - Next is the state machine that moves a pool between the states, and
//     the Reconciler runs it: it switches a pool only once no pending pod of
//     the other scheduler is left on it, and replaces (deletes, for their
//     controllers to create again) the pending pods of a gpuadmit-scheduler
//     whose Lease expired.
package handover
