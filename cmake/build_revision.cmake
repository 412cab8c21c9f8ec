# The git revision faprobe is built from, and whether its work tree had uncommitted changes, as a header:
#   cmake -DSOURCE_DIR=<the source tree> -DOUTPUT=<generated/build_revision.hpp> -P cmake/build_revision.cmake
# Run once at configure time and, by the faprobe_build_revision target, at every build, so that a binary
# built after a commit or an edit says so without a reconfigure. The header is written only when its text
# changes: an unchanged tree recompiles nothing. Untracked files do not make a tree dirty (as with
# `git describe --dirty`); --no-optional-locks keeps `git status` from taking the index lock, which a git
# command run at the same time by someone else would trip over. Outside a git checkout the revision is
# "unknown" and the tree is not dirty.
set(revision "unknown")
set(dirty 0)
find_program(faprobe_git git)
if(faprobe_git)
  execute_process(COMMAND ${faprobe_git} rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE head RESULT_VARIABLE head_status OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(head_status EQUAL 0 AND head)
    set(revision "${head}")
    execute_process(COMMAND ${faprobe_git} --no-optional-locks status --porcelain --untracked-files=no
                    WORKING_DIRECTORY ${SOURCE_DIR}
                    OUTPUT_VARIABLE changes RESULT_VARIABLE status_status ERROR_QUIET)
    if(status_status EQUAL 0 AND NOT changes STREQUAL "")
      set(dirty 1)
    endif()
  endif()
endif()

set(text "// Written by cmake/build_revision.cmake at every build: the git revision faprobe was built from.
#pragma once
#define FAPROBE_BUILD_GIT_REVISION \"${revision}\"
#define FAPROBE_BUILD_GIT_DIRTY ${dirty}
")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
