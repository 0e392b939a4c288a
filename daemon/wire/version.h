/* SPDX-License-Identifier: MIT */
#pragma once
/* The one version string of sbxd, sbx and sbx-load (ping, sbx_build_info). */
#define SBX_VERSION "0.1.0"
