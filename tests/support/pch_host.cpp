// The target that builds one runtime's precompiled header for the test areas (xsym_test_pch in
// tests/CMakeLists.txt); it compiles nothing of its own.
