package agentjob

import (
	"fmt"
	"strings"
	"time"
)

// Agent is what a controller whose objects run the agent embeds besides
// reconcile.Base, and hands to reconcile.Setup, which initialises it: the
// image of its agent pods and how long a finished Job waits for its pod's
// result.
type Agent struct {
	// AgentImage runs in every agent pod (the operator's --agent-image).
	AgentImage string
	// Images are the images per database server (--agent-images), for
	// operators that choose the image by the server a run found; the
	// zero value: AgentImage for every server.
	Images Images
	// ResultGrace is how long a finished Job waits for its pod's result to
	// reach the cache before it is recorded without one (Run.Grace); zero
	// is ResultGrace.
	ResultGrace time.Duration
}

// Init fails without an image and fills a's defaults (reconcile.Settings).
func (a *Agent) Init(kind string) error {
	if a.AgentImage == "" {
		return fmt.Errorf("%s controller: no agent image", strings.ToLower(kind))
	}
	if a.ResultGrace <= 0 {
		a.ResultGrace = ResultGrace
	}
	return nil
}
