# Scaffolding a new operator. Included by the main Makefile.

##@ Scaffolding

.PHONY: new-operator
new-operator: ## Generate a minimal, complete operator for a new kind: make new-operator NAME=<name> [PLATFORM=1] (docs/operators.md, "Adding an operator").
	@test -n "$(NAME)" || { echo "usage: make new-operator NAME=<name>"; exit 2; }
	PLATFORM=$(PLATFORM) hack/new-operator.sh $(NAME)

.PHONY: test-new-operator
test-new-operator: ## Prove the scaffold is complete: in a copy of the repository, make new-operator NAME=demo, generate, build (GOWORK and GOWORK=off), vet, and run its integration test.
	hack/new-operator_test.sh
