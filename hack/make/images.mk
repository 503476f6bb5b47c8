# Images built on this machine's Docker engine, without a registry.
# Included by the main Makefile, which defines ROOT.

# Names of the local images (the e2e pod runner and the demo use AGENT_IMAGE;
# the e2e and the demo install the platform with the operator images,
# $(OPERATOR_IMAGE_REPO)/<name>-operator:$(OPERATOR_IMAGE_TAG)).
BASE_IMAGE ?= cairn.local/debian:bookworm
AGENT_IMAGE ?= cairn.local/agent:dev
OPERATOR_IMAGE_REPO ?= cairn.local
OPERATOR_IMAGE_TAG ?= dev

##@ Images

.PHONY: images
images: ## Build the local images on Docker: a Debian 12 base by debootstrap + docker import (skipped when present), on it the agent image (agent/Containerfile) and one image per operator (operators/Containerfile, cairn.local/<name>-operator:dev), around static binaries built on the host in one go build. No pull.
	BASE_IMAGE=$(BASE_IMAGE) AGENT_IMAGE=$(AGENT_IMAGE) OPERATOR_IMAGE_REPO=$(OPERATOR_IMAGE_REPO) OPERATOR_IMAGE_TAG=$(OPERATOR_IMAGE_TAG) OPERATORS="$(OPERATORS)" hack/images/build.sh
