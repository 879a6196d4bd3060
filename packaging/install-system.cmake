# install-system.cmake - the part of `cmake --install` that depends on the
# install prefix as it is when installing (`make install PREFIX=...`, or
# `cmake --install --prefix`): the systemd unit, whose ExecStart names the
# installed gpuboxd and config file, and the config file under etc/.
#
# Run by cmake_install.cmake (install(SCRIPT) in CMakeLists.txt), which sets
# GPUBOX_SOURCE_DIR, GPUBOX_BINARY_DIR and the GNUInstallDirs directories
# GPUBOX_SBINDIR and GPUBOX_SYSCONFDIR. DESTDIR is honoured by file(INSTALL).

# The prefix without a trailing slash ("" for "/"), to join paths to.
string(REGEX REPLACE "/+$" "" prefix "${CMAKE_INSTALL_PREFIX}")

# As GNUInstallDirs does: the /usr prefix keeps its configuration in /etc.
if(IS_ABSOLUTE "${GPUBOX_SYSCONFDIR}")
  set(SYSCONFDIR "${GPUBOX_SYSCONFDIR}")
elseif(prefix STREQUAL "/usr" OR prefix STREQUAL "")
  set(SYSCONFDIR /etc)
else()
  set(SYSCONFDIR "${prefix}/${GPUBOX_SYSCONFDIR}")
endif()
if(IS_ABSOLUTE "${GPUBOX_SBINDIR}")
  set(SBINDIR "${GPUBOX_SBINDIR}")
else()
  set(SBINDIR "${prefix}/${GPUBOX_SBINDIR}")
endif()

# systemd reads units from /usr/lib/systemd/system and
# /usr/local/lib/systemd/system (`systemd-analyze unit-paths`); another
# prefix needs `systemctl link` (docs/install.md).
set(unit_dir "${GPUBOX_BINARY_DIR}/install")
configure_file("${GPUBOX_SOURCE_DIR}/packaging/gpuboxd.service.in"
               "${unit_dir}/gpuboxd.service" @ONLY)
file(INSTALL DESTINATION "${prefix}/lib/systemd/system" TYPE FILE
     FILES "${unit_dir}/gpuboxd.service")

# The config file is the operator's once installed: an install over an
# existing one leaves it alone (the package marks it a conffile, so dpkg
# asks instead). The same file is in share/doc/gpubox/examples.
set(conf "${SYSCONFDIR}/gpubox/gpuboxd.conf")
if(EXISTS "$ENV{DESTDIR}${conf}")
  message(STATUS "Keeping: $ENV{DESTDIR}${conf} (the new example is in share/doc/gpubox/examples)")
else()
  file(INSTALL DESTINATION "${SYSCONFDIR}/gpubox" TYPE FILE
       FILES "${GPUBOX_SOURCE_DIR}/packaging/gpuboxd.conf")
endif()
