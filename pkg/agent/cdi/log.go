package cdi

import (
	"fmt"

	"github.com/go-logr/logr"
)

// logger hands nvcdi's messages to logr. nvcdi warns about every optional
// file a driver may lack (graphics libraries, firmware), so its warnings
// are V(1), not errors of the agent's.
type logger struct{ log logr.Logger }

func (l logger) Errorf(f string, args ...any)   { l.log.Info("nvcdi error: " + fmt.Sprintf(f, args...)) }
func (l logger) Warningf(f string, args ...any) { l.log.V(1).Info("nvcdi: " + fmt.Sprintf(f, args...)) }
func (l logger) Infof(f string, args ...any)    { l.log.V(4).Info("nvcdi: " + fmt.Sprintf(f, args...)) }
func (l logger) Debugf(f string, args ...any)   { l.log.V(5).Info("nvcdi: " + fmt.Sprintf(f, args...)) }
func (l logger) Tracef(f string, args ...any)   { l.log.V(6).Info("nvcdi: " + fmt.Sprintf(f, args...)) }
