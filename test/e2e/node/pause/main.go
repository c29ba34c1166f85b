// Command pause is the only file of the sandbox image the real-node tests
// import into containerd (test/e2e/node): the process that holds a pod's
// namespaces. Like Kubernetes' pause it sleeps until SIGINT or SIGTERM and,
// as PID 1 of a pod that shares its process namespace, reaps orphans.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
