/* SPDX-License-Identifier: MIT */
/* sandbox/image.c: the host image, or a refusal when the test asks (fakes.h). */
#include "sandbox/image.h"

#include "fakes.h"

int fake_image_root_r;

int image_sandbox_root(const struct image *img, int *ret_fd, const char **ret_path, struct err *e)
{
    (void)img;
    if (ret_fd) {
        *ret_fd = -1;
    }
    *ret_path = "/";
    if (fake_image_root_r < 0) {
        return err_setx(e, fake_image_root_r, "image 'fake' refused");
    }
    return 0;
}
