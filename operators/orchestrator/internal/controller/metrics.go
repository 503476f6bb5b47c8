package controller

import "cairn.dev/libs/kindmetrics"

// The ProtectionPlan metrics users alert on: declared, and read from a ProtectionPlan, in
// libs/kindmetrics (the skeleton's Observe and Forget, what transition
// counts).
var metrics = kindmetrics.NewProtectionPlan()

// MetricNames lists every metric this operator exports (the monitoring
// component's tests check alerts reference real metrics).
var MetricNames = metrics.Names()
