//go:build tools

// Package tools pins Kueue's controller manager for hack/e2e-binaries.sh.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
