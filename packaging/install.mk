# `make install`, `make uninstall`, `make deb`, `make test-packaging`.
# Included from the top-level Makefile; paths are relative to the repository root.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]   binary, bypass library, config,
#                                                 rules, units, man pages, completions
#   make uninstall                                removes the same (keeps /etc/harrier)
#   make deb                                      target/debian/harrier_<ver>_amd64.deb
#   make test-packaging                           scripts/test-packaging.sh
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
# The library's real file lives here; $(LIBDIR)/libharrier-bypass.so is a symlink
# to it, so both names are one inode (the bypass's uprobe is attached by inode).
PKGLIBDIR   ?= $(LIBDIR)/harrier
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
SYSCONFDIR  ?= /etc
# systemd reads /usr/local/lib/systemd/system too; the package uses /lib/systemd/system.
UNITDIR     ?= $(LIBDIR)/systemd/system
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
RULESDIR    ?= $(DATADIR)/harrier/rules
# The default rules (the same ones are embedded in the binary). Where this file
# is missing a comment-only placeholder is installed instead.
RULES_SRC   ?= crates/harrier-rules/rules/harrier_rules.yaml

PKG_OUT  := target/release/pkg
GEN      := $(PKG_OUT)/gen
BYPASS_LIB := target/release/bypass/libharrier-bypass.so
# The tree the Debian package is made from: `make install` into it, /usr layout.
DEB_ROOT := $(PKG_OUT)/root
DEB_VARS := PREFIX=/usr UNITDIR=/lib/systemd/system ZSHCOMPDIR=/usr/share/zsh/vendor-completions
CARGO_DEB_VERSION := 3.8.0

SUBST = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@PKGLIBDIR@|$(PKGLIBDIR)|g' \
	    -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@RULESDIR@|$(RULESDIR)|g'

.PHONY: gen-docs install uninstall deb test-packaging

# Man pages and completions from the binary's own clap definition (hidden
# `harrier gen-docs`); man pages gzipped here so install and the package agree.
gen-docs: build
	rm -rf $(GEN)
	$(HARRIER) gen-docs $(GEN)
	gzip -9n $(GEN)/man/*.1

# Builds first (as the rest of this Makefile, as root); `make deb` stages with
# INSTALL_NEEDS= since it has just built.
INSTALL_NEEDS ?= gen-docs
install: $(INSTALL_NEEDS)
	install -D -m 0755 $(HARRIER) $(DESTDIR)$(BINDIR)/harrier
	install -D -m 0644 $(BYPASS_LIB) $(DESTDIR)$(PKGLIBDIR)/libharrier-bypass.so
	ln -sfn $(patsubst $(LIBDIR)/%,%,$(PKGLIBDIR))/libharrier-bypass.so $(DESTDIR)$(LIBDIR)/libharrier-bypass.so
	@# `falco` for Falco's users: a folder of its own to put first on PATH, so a real Falco's
	@# /usr/bin/falco is never shadowed unless asked (README, "Falco's command line").
	install -d -m 0755 $(DESTDIR)$(PKGLIBDIR)/falco
	ln -sfn ../../../bin/harrier $(DESTDIR)$(PKGLIBDIR)/falco/falco
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/harrier/rules.d
	@# The config is the admin's once installed: never overwritten.
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/harrier/harrier.yaml ]; then \
	  echo "install: keeping $(DESTDIR)$(SYSCONFDIR)/harrier/harrier.yaml"; \
	else \
	  $(SUBST) packaging/harrier.yaml.in > $(DESTDIR)$(SYSCONFDIR)/harrier/harrier.yaml && \
	  chmod 0644 $(DESTDIR)$(SYSCONFDIR)/harrier/harrier.yaml; \
	fi
	install -d -m 0755 $(DESTDIR)$(RULESDIR)
	@if [ -f $(RULES_SRC) ]; then \
	  install -m 0644 $(RULES_SRC) $(DESTDIR)$(RULESDIR)/harrier_rules.yaml; \
	else \
	  echo "install: $(RULES_SRC) missing, installing a placeholder"; \
	  printf '# Placeholder: %s was not in the source tree.\n' $(RULES_SRC) > $(DESTDIR)$(RULESDIR)/harrier_rules.yaml; \
	  chmod 0644 $(DESTDIR)$(RULESDIR)/harrier_rules.yaml; \
	fi
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	for u in harrier harrier-bypass; do \
	  $(SUBST) packaging/systemd/$$u.service.in > $(DESTDIR)$(UNITDIR)/$$u.service && \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/$$u.service || exit 1; \
	done
	install -d -m 0755 $(DESTDIR)$(MANDIR)/man1
	install -m 0644 $(GEN)/man/*.1.gz $(DESTDIR)$(MANDIR)/man1/
	install -D -m 0644 $(GEN)/completions/harrier $(DESTDIR)$(BASHCOMPDIR)/harrier
	install -D -m 0644 $(GEN)/completions/_harrier $(DESTDIR)$(ZSHCOMPDIR)/_harrier
	install -D -m 0644 $(GEN)/completions/harrier.fish $(DESTDIR)$(FISHCOMPDIR)/harrier.fish
	install -D -m 0644 packaging/debian/lintian-overrides $(DESTDIR)$(DATADIR)/lintian/overrides/harrier
	@[ -n "$(DESTDIR)" ] || echo "install: done. Services: systemctl daemon-reload; systemctl enable --now harrier (and harrier-bypass)"

# Removes what install put there, except /etc/harrier (the admin's). Stop the
# services first: `systemctl disable --now harrier harrier-bypass`.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/harrier $(DESTDIR)$(LIBDIR)/libharrier-bypass.so
	rm -f $(DESTDIR)$(PKGLIBDIR)/libharrier-bypass.so $(DESTDIR)$(RULESDIR)/harrier_rules.yaml
	rm -f $(DESTDIR)$(PKGLIBDIR)/falco/falco
	-rmdir $(DESTDIR)$(PKGLIBDIR)/falco 2>/dev/null
	rm -f $(DESTDIR)$(UNITDIR)/harrier.service $(DESTDIR)$(UNITDIR)/harrier-bypass.service
	rm -f $(DESTDIR)$(MANDIR)/man1/harrier.1.gz $(DESTDIR)$(MANDIR)/man1/harrier-*.1.gz
	rm -f $(DESTDIR)$(BASHCOMPDIR)/harrier $(DESTDIR)$(ZSHCOMPDIR)/_harrier $(DESTDIR)$(FISHCOMPDIR)/harrier.fish
	rm -f $(DESTDIR)$(DATADIR)/lintian/overrides/harrier
	-rmdir $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(RULESDIR) $(DESTDIR)$(DATADIR)/harrier 2>/dev/null
	@[ ! -d $(DESTDIR)$(SYSCONFDIR)/harrier ] || echo "uninstall: left $(DESTDIR)$(SYSCONFDIR)/harrier in place"

# cargo-deb takes the staged tree (assets in crates/harrier-cli/Cargo.toml),
# so the package and `make install PREFIX=/usr` cannot differ.
deb: gen-docs
	bash scripts/deps-packaging.sh cargo-deb
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory install INSTALL_NEEDS= DESTDIR=$(abspath $(DEB_ROOT)) $(DEB_VARS)
	$(CARGO) deb --locked --no-build --strip -p harrier-cli

test-packaging: deb
	bash scripts/test-packaging.sh
