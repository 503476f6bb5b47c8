# Releases: one operator at a time, each with its own version and tag.
# Included by the main Makefile, which defines ROOT and TOOLS_DIR.

OPERATOR ?=
VERSION ?=
CONTAINER_TOOL ?= podman
RELEASE_TOOL := cd $(ROOT)/hack/release && GOWORK=off go run ./cmd/release
RELEASE_ARGS = -root $(ROOT) -operator $(OPERATOR) -version $(VERSION)

##@ Release

.PHONY: release
release: ## Release one operator: make release OPERATOR=<name> VERSION=vX.Y.Z (semver newer than the last operators/<name>/v* tag; writes dist/<name>-vX.Y.Z.yaml; builds bin/<name>-operator with the version stamped; creates the local tag operators/<name>/vX.Y.Z). OPERATOR=kubectl-cairn is release-plugin.
	@test -n "$(OPERATOR)" -a -n "$(VERSION)" || { echo "usage: make release OPERATOR=<name> VERSION=vX.Y.Z"; exit 2; }
	@if [ "$(OPERATOR)" = kubectl-cairn ]; then $(MAKE) --no-print-directory release-plugin VERSION=$(VERSION); exit $$?; fi; \
	$(MAKE) --no-print-directory release-operator OPERATOR=$(OPERATOR) VERSION=$(VERSION)

.PHONY: release-operator
release-operator:
	@test -n "$(OPERATOR)" -a -n "$(VERSION)" || { echo "usage: make release OPERATOR=<name> VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE_TOOL) check $(RELEASE_ARGS)
	$(RELEASE_TOOL) render $(RELEASE_ARGS)
	cd $(ROOT)/operators/$(OPERATOR) && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(ROOT)/bin/$(OPERATOR)-operator .
	@test "$$($(ROOT)/bin/$(OPERATOR)-operator --version)" = "$(VERSION)" || { echo "release: bin/$(OPERATOR)-operator --version does not print $(VERSION)"; exit 1; }
	$(RELEASE_TOOL) tag $(RELEASE_ARGS)

.PHONY: release-manifest
release-manifest: ## Only render dist/<name>-vX.Y.Z.yaml for OPERATOR and VERSION (no checks, no tag).
	@test -n "$(OPERATOR)" -a -n "$(VERSION)" || { echo "usage: make release-manifest OPERATOR=<name> VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE_TOOL) render $(RELEASE_ARGS)

.PHONY: release-image
release-image: ## Build the image ghcr.io/cairn-dev/<name>-operator:vX.Y.Z from operators/Containerfile (OPERATOR=<name>) with CONTAINER_TOOL (podman or docker).
	@test -n "$(OPERATOR)" -a -n "$(VERSION)" || { echo "usage: make release-image OPERATOR=<name> VERSION=vX.Y.Z"; exit 2; }
	$(CONTAINER_TOOL) build -f operators/Containerfile --build-arg OPERATOR=$(OPERATOR) --build-arg VERSION=$(VERSION) -t ghcr.io/cairn-dev/$(OPERATOR)-operator:$(VERSION) .

.PHONY: test-deploy
test-deploy: controlplane ## Test the install manifests and the release tool (deploy/: every base, the platform and its components built with kustomize and applied to a real kube-apiserver).
	cd deploy && go test $(GO_TEST_FLAGS) ./...

.PHONY: release-plugin
release-plugin: ## Release the kubectl plugin: make release-plugin VERSION=vX.Y.Z (semver newer than the last kubectl-cairn/v* tag; writes dist/kubectl-cairn_vX.Y.Z_<os>_<arch>.tar.gz for linux/amd64, linux/arm64, darwin/amd64, darwin/arm64, their dist/kubectl-cairn-vX.Y.Z.sha256 and the krew manifest dist/kubectl-cairn-vX.Y.Z.yaml; creates the local tag kubectl-cairn/vX.Y.Z).
	@test -n "$(VERSION)" || { echo "usage: make release-plugin VERSION=vX.Y.Z"; exit 2; }
	$(RELEASE_TOOL) check -root $(ROOT) -operator kubectl-cairn -version $(VERSION)
	$(RELEASE_TOOL) plugin -root $(ROOT) -version $(VERSION)
	$(RELEASE_TOOL) tag -root $(ROOT) -operator kubectl-cairn -version $(VERSION)
