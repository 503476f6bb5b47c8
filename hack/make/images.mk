# Images built on this machine's Docker engine, without a registry.
# Included by the main Makefile, which defines ROOT.

# Names of the local images (the e2e pod runner and the demo use AGENT_IMAGE).
BASE_IMAGE ?= cairn.local/debian:bookworm
AGENT_IMAGE ?= cairn.local/agent:dev

##@ Images

.PHONY: images
images: ## Build the local images on Docker: a Debian 12 base by debootstrap + docker import (skipped when present), and the agent image from agent/Containerfile on it. No pull.
	BASE_IMAGE=$(BASE_IMAGE) AGENT_IMAGE=$(AGENT_IMAGE) hack/images/build.sh
