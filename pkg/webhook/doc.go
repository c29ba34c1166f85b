// Package webhook assembles gpuadmit's admission server: a controller-runtime
// manager serving the mutating webhook (/mutate-v1-pod) over TLS with a
// certificate reloaded from disk,
// the live inventory from a Node informer, namespaces from a Namespace
// informer, the policy engine fed by a watched policy path, Prometheus
// metrics, and /healthz and /readyz probes that report why the replica is or
// is not ready.
package webhook
