# Installation and the Debian package (CPack): `cmake --build --preset release --target
# package` writes build/release/cohort_<version>_<arch>.deb with the binary, the demo model,
# the systemd unit, its default settings (a conffile) and the deployment guide.
include(GNUInstallDirs)

install(TARGETS cohort RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/models/stories260K.gguf DESTINATION ${CMAKE_INSTALL_DATADIR}/cohort/models)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/cohort.service DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/cohort.default DESTINATION /etc/default RENAME cohort)
install(FILES ${PROJECT_SOURCE_DIR}/docs/DEPLOY.md ${PROJECT_SOURCE_DIR}/docs/CLUSTER.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Debian wants its copyright file and a compressed changelog in the doc folder.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/cohort)
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/changelog.gz
                   COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/packaging/changelog > ${PROJECT_BINARY_DIR}/changelog.gz
                   DEPENDS ${PROJECT_SOURCE_DIR}/packaging/changelog)
add_custom_target(cohort_changelog ALL DEPENDS ${PROJECT_BINARY_DIR}/changelog.gz)
install(FILES ${PROJECT_BINARY_DIR}/changelog.gz DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/cohort)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cohort)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "cohort maintainers <cohort@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference on one machine or a cluster of ordinary ones")
# (CPack indents the lines after the first itself; each stays under 80 columns.)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "cohort pools ordinary computers into one LLM inference cluster.
Every machine runs the same binary; together they hold a model no single
one could, behind one OpenAI-compatible HTTP endpoint. The package installs
the cohort command, a systemd unit (cohort.service) and its settings in
/etc/default/cohort.")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Library dependencies from the binary's links (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/packaging/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
