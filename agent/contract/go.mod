module cairn.dev/agent/contract

go 1.26.0
