# Thin wrapper over CMake and the scripts in scripts/. The two commands a
# newcomer needs are `make run` and `make test` (see README.md).

BUILD_TEST    ?= build/test
BUILD_RELEASE ?= build/release
JOBS          ?= 2
FUZZ_SECONDS  ?= 60
ARGS          ?=
PREFIX        ?= /usr/local
DESTDIR       ?=
DEB_DIR       ?= build/deb

.PHONY: all run test bench build build-test build-opt deps format clean fuzz install deb screenshots

all: build

deps:
	@scripts/install-deps.sh all

build:
	@scripts/install-deps.sh build
	cmake -S . -B $(BUILD_RELEASE) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUBOX_TESTS=OFF >/dev/null
	cmake --build $(BUILD_RELEASE) -j$(JOBS)

build-test:
	@scripts/install-deps.sh test
	cmake -S . -B $(BUILD_TEST) -DCMAKE_BUILD_TYPE=Debug -DGPUBOX_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_TEST) -j$(JOBS)

# The optimized build types compile with their tests and -Werror too (GCC
# warns about more at -O2 and -O3 than at -O0); compiling is enough, the
# tests run in the sanitizer build.
OPT_TYPES ?= RelWithDebInfo Release
build-opt:
	@scripts/install-deps.sh test
	@for t in $(OPT_TYPES); do \
		echo "== $$t build with tests (compile only) =="; \
		cmake -S . -B build/opt-$$t -DCMAKE_BUILD_TYPE=$$t -DGPUBOX_TESTS=ON >/dev/null && \
		cmake --build build/opt-$$t -j$(JOBS) >build/opt-$$t.log 2>&1 || \
		{ grep -E 'error|warning' build/opt-$$t.log | head -40; exit 1; }; \
	done

# Install the release build (docs/install.md): gpuboxd, gpubox, their man
# pages, the bash completion, gpuboxd.service and the config file. An
# existing PREFIX's etc/gpubox/gpuboxd.conf is kept.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD_RELEASE) --prefix "$(PREFIX)"

# The same files as a Debian package (prefix /usr), in $(DEB_DIR).
deb: build
	scripts/make-deb.sh $(BUILD_RELEASE) $(DEB_DIR)

# Install what is missing, build, start gpuboxd with the embedded SQLite store.
run:
	@scripts/install-deps.sh run
	@$(MAKE) --no-print-directory build
	scripts/run.sh $(BUILD_RELEASE) $(ARGS)

# Every test: C unit tests and end-to-end tests against the real dockerd.
test: build-test build-opt
	scripts/test.sh $(BUILD_TEST)

# libFuzzer targets (tests/fuzz), built with clang in build/fuzz, each run
# for FUZZ_SECONDS; `make test` runs them for a few seconds each.
fuzz:
	@scripts/install-deps.sh test
	scripts/fuzz.sh $(FUZZ_SECONDS)

# Benchmarks print ratios against a baseline measured in the same run.
bench:
	@scripts/install-deps.sh bench
	@$(MAKE) --no-print-directory build
	bench/run.sh $(BUILD_RELEASE)

# The web console's screenshots in docs/img (docs/web.md), taken by the
# browser tests against a real gpuboxd and dockerd.
screenshots: build-test
	scripts/screenshots.sh $(BUILD_TEST)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build
