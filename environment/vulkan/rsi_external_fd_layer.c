/*
 * A Vulkan layer for CPU rendering of SAPIEN 2.2 on Mesa's lavapipe.
 *
 * SAPIEN asks for VK_KHR_external_semaphore_fd and VK_KHR_external_fence_fd when it creates its
 * device (it uses them only for CUDA interop, never during our runs); lavapipe lacks them, so
 * device creation fails with ErrorExtensionNotPresent. This layer advertises the two extensions,
 * removes them again from the device create info, and answers their four entry points with
 * stubs that report VK_ERROR_FEATURE_NOT_PRESENT. It changes nothing else.
 */
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define LAYER_NAME "VK_LAYER_RSI_external_fd_stub"
#define MAX_DEVICES 16

static const VkExtensionProperties kStubbed[] = {
    {VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME, VK_KHR_EXTERNAL_SEMAPHORE_FD_SPEC_VERSION},
    {VK_KHR_EXTERNAL_FENCE_FD_EXTENSION_NAME, VK_KHR_EXTERNAL_FENCE_FD_SPEC_VERSION},
};
#define N_STUBBED (sizeof(kStubbed) / sizeof(kStubbed[0]))

static PFN_vkGetInstanceProcAddr next_instance_proc;
static PFN_vkEnumerateDeviceExtensionProperties next_enumerate_extensions;
static PFN_vkCreateDevice next_create_device;
static struct {
  VkDevice device;
  PFN_vkGetDeviceProcAddr next;
} devices[MAX_DEVICES];

static int is_stubbed(const char *name) {
  for (size_t i = 0; i < N_STUBBED; i++)
    if (strcmp(name, kStubbed[i].extensionName) == 0) return 1;
  return 0;
}

static VKAPI_ATTR VkResult VKAPI_CALL stub_get_semaphore_fd(VkDevice d, const VkSemaphoreGetFdInfoKHR *i, int *fd) {
  return VK_ERROR_FEATURE_NOT_PRESENT;
}
static VKAPI_ATTR VkResult VKAPI_CALL stub_import_semaphore_fd(VkDevice d, const VkImportSemaphoreFdInfoKHR *i) {
  return VK_ERROR_FEATURE_NOT_PRESENT;
}
static VKAPI_ATTR VkResult VKAPI_CALL stub_get_fence_fd(VkDevice d, const VkFenceGetFdInfoKHR *i, int *fd) {
  return VK_ERROR_FEATURE_NOT_PRESENT;
}
static VKAPI_ATTR VkResult VKAPI_CALL stub_import_fence_fd(VkDevice d, const VkImportFenceFdInfoKHR *i) {
  return VK_ERROR_FEATURE_NOT_PRESENT;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateInstance(const VkInstanceCreateInfo *info,
                                                           const VkAllocationCallbacks *alloc, VkInstance *instance) {
  VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
  while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
    link = (VkLayerInstanceCreateInfo *)link->pNext;
  if (!link) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
  VkResult result = create(info, alloc, instance);
  if (result == VK_SUCCESS) {
    next_instance_proc = gipa; /* SAPIEN makes one instance per process */
    next_enumerate_extensions =
        (PFN_vkEnumerateDeviceExtensionProperties)gipa(*instance, "vkEnumerateDeviceExtensionProperties");
    next_create_device = (PFN_vkCreateDevice)gipa(*instance, "vkCreateDevice");
  }
  return result;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_EnumerateDeviceExtensionProperties(VkPhysicalDevice gpu, const char *layer,
                                                                               uint32_t *count,
                                                                               VkExtensionProperties *props) {
  if (layer && strcmp(layer, LAYER_NAME) == 0) {  /* the layer's own extensions */
    if (!props) { *count = N_STUBBED; return VK_SUCCESS; }
    uint32_t n = *count < N_STUBBED ? *count : N_STUBBED;
    memcpy(props, kStubbed, n * sizeof(*props));
    *count = n;
    return n < N_STUBBED ? VK_INCOMPLETE : VK_SUCCESS;
  }
  PFN_vkEnumerateDeviceExtensionProperties next = next_enumerate_extensions;
  if (layer) return next(gpu, layer, count, props);
  uint32_t native = 0;
  VkResult result = next(gpu, NULL, &native, NULL);
  if (result != VK_SUCCESS) return result;
  VkExtensionProperties *all = calloc(native + N_STUBBED, sizeof(*all));
  if (!all) return VK_ERROR_OUT_OF_HOST_MEMORY;
  result = next(gpu, NULL, &native, all);
  uint32_t total = native;
  for (size_t i = 0; i < N_STUBBED; i++) {
    int present = 0;
    for (uint32_t j = 0; j < native; j++) present |= strcmp(all[j].extensionName, kStubbed[i].extensionName) == 0;
    if (!present) all[total++] = kStubbed[i];
  }
  if (!props) {
    *count = total;
  } else {
    uint32_t n = *count < total ? *count : total;
    memcpy(props, all, n * sizeof(*props));
    result = n < total ? VK_INCOMPLETE : VK_SUCCESS;
    *count = n;
  }
  free(all);
  return result;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateDevice(VkPhysicalDevice gpu, const VkDeviceCreateInfo *info,
                                                         const VkAllocationCallbacks *alloc, VkDevice *device) {
  VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)info->pNext;
  while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
    link = (VkLayerDeviceCreateInfo *)link->pNext;
  if (!link) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;

  /* The same request without the two extensions the driver does not have. */
  const char **names = calloc(info->enabledExtensionCount + 1, sizeof(char *));
  if (!names) return VK_ERROR_OUT_OF_HOST_MEMORY;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < info->enabledExtensionCount; i++)
    if (!is_stubbed(info->ppEnabledExtensionNames[i])) names[kept++] = info->ppEnabledExtensionNames[i];
  VkDeviceCreateInfo filtered = *info;
  filtered.enabledExtensionCount = kept;
  filtered.ppEnabledExtensionNames = names;

  PFN_vkCreateDevice create = next_create_device;
  VkResult result = create(gpu, &filtered, alloc, device);
  free(names);
  if (result != VK_SUCCESS) return result;
  for (int i = 0; i < MAX_DEVICES; i++) {
    if (devices[i].device == VK_NULL_HANDLE) {
      devices[i].device = *device;
      devices[i].next = gdpa;
      return VK_SUCCESS;
    }
  }
  return VK_ERROR_TOO_MANY_OBJECTS;
}

static PFN_vkVoidFunction stub_for(const char *name) {
  if (strcmp(name, "vkGetSemaphoreFdKHR") == 0) return (PFN_vkVoidFunction)stub_get_semaphore_fd;
  if (strcmp(name, "vkImportSemaphoreFdKHR") == 0) return (PFN_vkVoidFunction)stub_import_semaphore_fd;
  if (strcmp(name, "vkGetFenceFdKHR") == 0) return (PFN_vkVoidFunction)stub_get_fence_fd;
  if (strcmp(name, "vkImportFenceFdKHR") == 0) return (PFN_vkVoidFunction)stub_import_fence_fd;
  return NULL;
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device, const char *name);

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetInstanceProcAddr(VkInstance instance, const char *name) {
  if (strcmp(name, "vkGetInstanceProcAddr") == 0) return (PFN_vkVoidFunction)layer_GetInstanceProcAddr;
  if (strcmp(name, "vkGetDeviceProcAddr") == 0) return (PFN_vkVoidFunction)layer_GetDeviceProcAddr;
  if (strcmp(name, "vkCreateInstance") == 0) return (PFN_vkVoidFunction)layer_CreateInstance;
  if (strcmp(name, "vkCreateDevice") == 0) return (PFN_vkVoidFunction)layer_CreateDevice;
  if (strcmp(name, "vkEnumerateDeviceExtensionProperties") == 0)
    return (PFN_vkVoidFunction)layer_EnumerateDeviceExtensionProperties;
  return next_instance_proc ? next_instance_proc(instance, name) : NULL;
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device, const char *name) {
  PFN_vkVoidFunction stub = stub_for(name);
  if (stub) return stub;
  if (strcmp(name, "vkGetDeviceProcAddr") == 0) return (PFN_vkVoidFunction)layer_GetDeviceProcAddr;
  for (int i = 0; i < MAX_DEVICES; i++)
    if (devices[i].device == device) return devices[i].next(device, name);
  return NULL;
}

VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *interface) {
  if (interface->loaderLayerInterfaceVersion > 2) interface->loaderLayerInterfaceVersion = 2;
  interface->pfnGetInstanceProcAddr = layer_GetInstanceProcAddr;
  interface->pfnGetDeviceProcAddr = layer_GetDeviceProcAddr;
  interface->pfnGetPhysicalDeviceProcAddr = NULL;
  return VK_SUCCESS;
}
