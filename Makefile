# adorch: `make run` builds and runs the daemon on its embedded default config;
# `make test` runs every test. Both install what they need first.

SWIFT ?= swift
BUILD := .build/debug
# Extra arguments for adorchd under `make run`, e.g. ARGS="--log-level debug".
ARGS ?=

.PHONY: run test build deps clean help

help:
	@echo "make run    build and run adorchd in the foreground on the embedded default config"
	@echo "make test   build and run every test (unit and integration)"
	@echo "make build  build the daemon, adorchctl and the plugins"

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

run: build
	$(BUILD)/adorchd $(ARGS)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing

clean:
	rm -rf .build
